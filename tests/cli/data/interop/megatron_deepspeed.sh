#!/bin/bash
# Megatron-DeepSpeed style: a string of arguments expanded unquoted, an inline ds_config written by a heredoc,
# the node count left to SLURM.
GPUS_PER_NODE=8
NNODES=$SLURM_NNODES
ZERO_STAGE=1
GPT_ARGS="
    --num-layers 24 \
    --hidden-size 2048 \
    --num-attention-heads 16 \
    --seq-length 2048 \
    --micro-batch-size 4 \
    --global-batch-size 512 \
    --fp16
"
cat <<EOT > ds_config.json
{
  "train_batch_size" : 512,
  "zero_optimization": { "stage": $ZERO_STAGE }
}
EOT
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES"
python -m torch.distributed.launch $DISTRIBUTED_ARGS \
       pretrain_gpt.py \
       --tensor-model-parallel-size 2 \
       $GPT_ARGS \
       --zero-stage $ZERO_STAGE \
       --deepspeed --deepspeed_config ds_config.json
