# Embeds every JSON file under profiles/ into the binary, so parplan works from any directory.
# parplan_embed_profiles(<target>) adds the generated translation unit defining parplan::embedded_profiles();
# call it from the directory that defines <target> (custom-command outputs are directory-scoped).
function(parplan_embed_profiles target)
  file(GLOB_RECURSE profile_files CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/profiles/*.json")
  set(out "${CMAKE_BINARY_DIR}/generated/embedded_profiles.cpp")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -DPROFILE_DIR=${CMAKE_SOURCE_DIR}/profiles -DOUT=${out}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_profiles_script.cmake
    DEPENDS ${profile_files} ${CMAKE_SOURCE_DIR}/cmake/embed_profiles_script.cmake
    COMMENT "Embedding profiles/*.json"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()

# parplan_embed_file(<target> <file relative to the source root> <function>) adds a generated translation unit
# defining `std::string_view parplan::<function>()`, the file's bytes (e.g. validation/accuracy.json).
function(parplan_embed_file target file func)
  set(in "${CMAKE_SOURCE_DIR}/${file}")
  set(out "${CMAKE_BINARY_DIR}/generated/${func}.cpp")
  add_custom_command(
    OUTPUT "${out}"
    COMMAND ${CMAKE_COMMAND} -DFILE=${in} -DFUNC=${func} -DOUT=${out} -P ${CMAKE_SOURCE_DIR}/cmake/embed_file_script.cmake
    DEPENDS "${in}" ${CMAKE_SOURCE_DIR}/cmake/embed_file_script.cmake
    COMMENT "Embedding ${file}"
    VERBATIM)
  target_sources(${target} PRIVATE "${out}")
endfunction()
