# Embeds every JSON file under profiles/ into the binary, so parplan works from any directory.
# parplan_embed_profiles(<out.cpp>) generates a translation unit defining parplan::embedded_profiles().
file(GLOB_RECURSE PARPLAN_PROFILE_FILES CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/profiles/*.json")
set(PARPLAN_EMBED_OUT "${CMAKE_BINARY_DIR}/generated/embedded_profiles.cpp")
add_custom_command(
  OUTPUT "${PARPLAN_EMBED_OUT}"
  COMMAND ${CMAKE_COMMAND} -DPROFILE_DIR=${CMAKE_SOURCE_DIR}/profiles -DOUT=${PARPLAN_EMBED_OUT}
          -P ${CMAKE_SOURCE_DIR}/cmake/embed_profiles_script.cmake
  DEPENDS ${PARPLAN_PROFILE_FILES} ${CMAKE_SOURCE_DIR}/cmake/embed_profiles_script.cmake
  COMMENT "Embedding profiles/*.json"
  VERBATIM)
