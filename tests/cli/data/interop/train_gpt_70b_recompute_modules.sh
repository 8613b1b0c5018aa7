#!/bin/bash
# Megatron-LM launch script in the style of examples/gpt3/train_gpt3_175b_distributed.sh: variables, arrays,
# "${ARRAY[@]}" expansion, line continuations.
export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NUM_NODES=${NUM_NODES:-64}
TP=8
PP=4
VP_LAYERS=5
CHECKPOINT_PATH=$1

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr localhost
    --master_port 6000
)

GPT_MODEL_ARGS=(
    --num-layers 80
    --hidden-size 8192
    --ffn-hidden-size 28672
    --num-attention-heads 64
    --group-query-attention
    --num-query-groups 8
    --seq-length 4096
    --max-position-embeddings 4096
    --swiglu
    --normalization RMSNorm
    --position-embedding-type rope
    --disable-bias-linear
    --untie-embeddings-and-output-weights
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --vocab-size 128256
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size $((GPUS_PER_NODE * NUM_NODES / 2))
    --lr 1.5e-4
    --train-iters 500000
    --recompute-granularity selective
    --recompute-modules layernorm moe_act core_attn
    --bf16
    --use-distributed-optimizer
    --overlap-grad-reduce
)

MODEL_PARALLEL_ARGS=(
	--tensor-model-parallel-size ${TP}
	--pipeline-model-parallel-size $PP
	--num-layers-per-virtual-pipeline-stage $VP_LAYERS
	--sequence-parallel
)

torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \
    "${GPT_MODEL_ARGS[@]}" \
    "${TRAINING_ARGS[@]}" \
    "${MODEL_PARALLEL_ARGS[@]}" \
    --save $CHECKPOINT_PATH \
    --log-interval 10
