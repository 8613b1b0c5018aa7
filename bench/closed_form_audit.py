#!/usr/bin/env python3
"""Closed form against the event simulator on random command-line plans.

  python3 bench/closed_form_audit.py PARPLAN[,PARPLAN2...] N SEED [--whole-activations] [--out FILE]

Draws N plans (seeded: the same N and SEED give the same plans): a model from 1.3B to 405B, tp 1-8, pp 1-16,
dp 1-8, every schedule (interleaved with v 2-4 and m a multiple of pp, a third of those with overlapped sends),
1-32 microbatches, uneven first / last stages, ZeRO 0-3, recompute, sequence parallelism, H100 or A100 clusters.
--whole-activations draws 1.3B-175B models on A100 clusters with --no-p2p-scatter-gather (sends tp times larger).
Runs `parplan simulate --json` with each binary and reports (closed form - simulated) / simulated over the plans
every binary accepts (the others are refused with a one-line error: invalid meshes, too little memory is fine).
"""
import json
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

LAYERS = {'gpt3-1.3b': 24, 'gpt3-6.7b': 32, 'gpt3-13b': 40, 'gpt3-175b': 96, 'llama2-7b': 32, 'llama2-70b': 80,
          'llama3-8b': 32, 'llama3-70b': 80, 'bloom-176b': 70, 'opt-175b': 96, 'megatron-530b': 105,
          'llama3-405b': 126}
SMALL = ['gpt3-1.3b', 'gpt3-6.7b', 'gpt3-13b', 'llama2-7b', 'llama3-8b', 'gpt3-175b']


def draw(rng, whole):
    model = rng.choice(SMALL if whole else sorted(LAYERS))
    layers = LAYERS[model]
    tp, pp, dp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 4, 6, 8, 12, 16]), rng.choice([1, 2, 4, 8])
    a = ['--model', model, '--gpus', str(tp * pp * dp), '--tp', str(tp), '--pp', str(pp)]
    schedule = rng.choice(['1f1b', '1f1b', 'gpipe', 'zb-h1', 'interleaved'])
    m = rng.choice([1, 2, 3, 4, 5, 7, 8, 12, 16, 24, 32])
    if schedule == 'interleaved':
        m = pp * rng.choice([1, 2, 3, 4])
        a += ['--vpp', str(rng.choice([2, 3, 4]))]
        if rng.random() < 0.3:
            a += ['--overlap-p2p']
    else:
        a += ['--schedule', schedule]
    a += ['--microbatches', str(m), '--global-batch', str(m * dp)]
    if pp > 1 and schedule != 'interleaved' and rng.random() < 0.6:
        if rng.random() < 0.5:
            a += ['--first-stage-layers', str(rng.randint(1, max(1, layers // pp + 3)))]
        if rng.random() < 0.6:
            a += ['--last-stage-layers', str(rng.randint(1, max(1, layers // pp + 3)))]
    a += ['--zero', str(rng.choice([0, 1, 1, 2, 3])), '--recompute', rng.choice(['none', 'selective', 'full'])]
    if tp > 1 and rng.random() < 0.7:
        a += ['--sp']
    if whole:
        a += ['--cluster', 'dgx-a100', '--no-p2p-scatter-gather']
    else:
        a += ['--cluster', rng.choice(['dgx-h100', 'dgx-a100', 'dgx-h100'])]
    return a


def main():
    args = [x for x in sys.argv[1:] if not x.startswith('--')]
    if len(args) < 3:
        sys.exit(__doc__)
    bins, n, seed = args[0].split(','), int(args[1]), int(args[2])
    whole = '--whole-activations' in sys.argv
    out = sys.argv[sys.argv.index('--out') + 1] if '--out' in sys.argv else None
    rng = random.Random(seed)
    plans = [draw(rng, whole) for _ in range(n)]

    def run(plan):
        errs = []
        for b in bins:
            r = subprocess.run([b, 'simulate', '--json'] + plan, capture_output=True, text=True, timeout=300)
            if r.returncode not in (0, 1):  # 1: the plan does not fit, simulated all the same
                errs.append(None)
                continue
            j = json.loads(r.stdout)
            errs.append((j['closed_form_step_s'] - j['step_s']) / j['step_s'])
        return {'args': plan, 'err': errs}

    with ThreadPoolExecutor(2) as ex:
        rows = list(ex.map(run, plans))
    if out:
        with open(out, 'w') as f:
            json.dump(rows, f)
    ok = [r for r in rows if all(e is not None for e in r['err'])]
    print(f'{len(ok)} of {n} plans simulated by every binary')
    if not ok:
        return
    for i, b in enumerate(bins):
        e = [r['err'][i] * 100 for r in ok]
        print(f'{b}: {min(e):+.2f}%..{max(e):+.2f}%, mean |error| {sum(abs(x) for x in e) / len(e):.3f}%, '
              f'beyond 2%: {sum(abs(x) > 2 for x in e)}')


if __name__ == '__main__':
    main()
