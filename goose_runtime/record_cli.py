"""``goose profile-latency`` and ``goose record-traces``: measure this device's verification
latency (the JSON ``goose optimize --latency`` and ``decode --method auto`` read) and record the
traces of ``traces/``.

torch and transformers are imported inside the handlers only, as in :mod:`.decode_cli`. Bad input
ends with one line on stderr and exit code 2, before the model loads.

Example:
    goose profile-latency --sizes 1,2,4,8,16,32,64 --out latency.json
    goose record-traces --out-dir traces
    goose record-traces --out-dir my-traces --temperature 0.7 --sample-top-p 0.9   # sampled, for goose loop
"""
from __future__ import annotations

import argparse
import os
import sys

from goose_theory.cli_util import UsageError, check_output_file, format_table, print_json, split_list

from .cli_checks import add_sampling_options, check_model_args, check_run_args, make_config, sampling_settings
from .decode_cli import add_model_options, load_quietly, say

RECORD_BENCHES = ("humaneval", "mtbench", "stdlib")
RECORD_METHODS = ("ar", "pld", "tr", "iso:3", "mixed-iso:3", "goose", "goose@16")


def register(subparsers) -> None:
    prof = subparsers.add_parser("profile-latency", help="verification latency against tree size on this device")
    prof.add_argument("--sizes", default="1,2,4,8,16,32,64,128", help="comma-separated forward sizes (tokens; default 1,2,4,8,16,32,64,128)")
    prof.add_argument("--repeats", type=int, default=5, help="timed forwards per size; the median is kept (default 5)")
    prof.add_argument("--out", required=True, help="latency JSON to write (goose-latency/1)")
    add_model_options(prof)
    prof.add_argument("--json", action="store_true", help="print the profile as one JSON object")
    prof.set_defaults(handler=profile_handler)

    rec = subparsers.add_parser("record-traces", help="record the traces of traces/ (the default model, fp32, CPU), "
                                "or the same runs of your --model")
    rec.add_argument("--out-dir", default="traces", help="default traces/ (replaces the shipped traces: use another "
                     "folder for your own runs)")
    rec.add_argument("--limit", type=int, default=6, help="prompts per set (default 6)")
    rec.add_argument("--max-new-tokens", type=int, default=128, help="default 128")
    add_model_options(rec, device="cpu", threads=1)
    add_sampling_options(rec)  # traces at the setting you serve with, for goose loop / fit-acceptance to fit
    rec.set_defaults(handler=record_handler)


def profile_handler(args: argparse.Namespace) -> int:
    from goose_theory.latency import MAX_SIZE  # the format's limit (imported here: numba, not at start-up)

    check_run_args(args)
    check_model_args(args)  # before the note below and the model load
    items = split_list(args.sizes, "--sizes")
    try:
        sizes = sorted({int(s) for s in items})
    except ValueError:
        raise UsageError(f"--sizes must be comma-separated integers, got {args.sizes!r}") from None
    if sizes[0] < 1 or sizes[-1] > MAX_SIZE:
        raise UsageError(f"--sizes must be integers in 1..{MAX_SIZE}, got {args.sizes!r}")
    if sizes[0] != 1:
        print("[goose] note: without size 1 (a plain decode step) the profile serves goose optimize, not "
              "decode --method auto", file=sys.stderr)
    from goose_theory.latency import save_latency
    from .profile import profile_latency

    bundle = load_quietly(args)
    profile = profile_latency(bundle, sizes=sizes, repeats=args.repeats)
    save_latency(profile, args.out)
    # the ratio is to a decode step only where size 1 was measured; else to the smallest tree
    ratio = "x decode step" if profile.sizes[0] == 1 else f"x size {profile.sizes[0]}"
    rows = [{"size": n, "ms": 1e3 * s, ratio: s / profile.seconds[0]} for n, s in zip(profile.sizes, profile.seconds)]
    if added := sorted(set(profile.sizes) - set(sizes)):  # with_crossover: the cost steps there
        say(f"note: sizes {', '.join(map(str, added))} added: the linears switch from MKL to oneDNN there "
            f"(this host's plan), and the profile interpolates linearly between sizes")
    if args.json:
        print_json({"out": args.out, "device": profile.device, "model": profile.model, "dtype": profile.dtype,
                    "sizes": list(profile.sizes), "seconds": list(profile.seconds),
                    "draft_s": profile.draft_s, "draft_s_per_node": profile.draft_s_per_node})
    else:
        print(format_table(rows))
        print(f"draft overhead: {1e3 * profile.draft_s:.3f} ms/cycle + {1e6 * profile.draft_s_per_node:.2f} us/node")
        print(f"wrote {args.out}")
    return 0


def record_handler(args: argparse.Namespace) -> int:
    check_run_args(args)
    check_model_args(args)  # a local --model folder must hold config.json (the default model's load converts it)
    for bench in RECORD_BENCHES:  # every file of the set, before minutes of recording (the folder is checked above)
        check_output_file(os.path.join(args.out_dir, f"{bench}.parquet"), "--out-dir")
    make_config(**sampling_settings(args))  # their ranges, named by flag, before the model loads
    from .recording import record_traces

    files = record_traces(out_dir=args.out_dir, limit=args.limit, max_new_tokens=args.max_new_tokens,
                          benches=RECORD_BENCHES, methods=RECORD_METHODS, threads=args.threads, model=args.model,
                          device=args.device, dtype=args.dtype, sampling=sampling_settings(args))
    print(format_table(files))
    return 0
