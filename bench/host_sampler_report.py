"""The profile of bench/host_sampler.c's samples, per thread: where the
samples stopped (self), which functions were on the stack (inclusive), and
the innermost frame inside a chosen library (`--own`, default libtessera:
our function that was running, or that called into the driver or libc).
Run it where the samples were taken, so that nm reads the same libraries.

    python3 bench/host_sampler_report.py FILE [--syms NAME=NM_FILE ...] [--own NAME] [--top N]
                                         [--under NAME] [--all]

--syms gives the functions of a library whose loaded copy was stripped, as
`nm -C --defined-only` printed them from an unstripped copy (the GPU machine
runs a stripped libtessera: `nm -C --defined-only build/libtessera.so.0 >
libtessera.syms`). Others come from nm on the loaded file, its dynamic
symbols where it is stripped; a sample is named by the nearest function at
or below its address. --under keeps the samples with a frame whose name
contains NAME (the callers of a function: its inclusive list). Threads are
listed main thread first, then stream workers, the CPU thread pool and
others; a thread that spent nearly all its samples outside Tessera's code
(idle) is left out unless --all.
"""
import argparse
import bisect
import collections
import os
import subprocess


def parse(path):
    maps, samples = [], []
    main_tid = None
    with open(path) as f:
        for line in f:
            if line.startswith("samples "):
                main_tid = int(line.split()[-1])
            elif line.startswith("map "):
                parts = line[4:].split()
                if len(parts) < 6 or "x" not in parts[1]:
                    continue
                start, end = (int(x, 16) for x in parts[0].split("-"))
                maps.append((start, end, int(parts[2], 16), parts[5]))
            elif line.startswith("s "):
                parts = line.split()
                samples.append((int(parts[1]), [int(x, 16) for x in parts[2:]]))
    maps.sort()
    return maps, samples, main_tid


def symbol_table(path, given):
    """Sorted (address, name) of a library's functions: from a file of
    `nm -C` lines where given, else from nm on the library (its static
    symbols, or its dynamic ones where it is stripped)."""
    lines = []
    if given:
        with open(given) as f:
            lines = f.read().splitlines()
    elif os.path.exists(path):
        for flags in (["-C", "--defined-only"], ["-C", "-D", "--defined-only"]):
            try:
                r = subprocess.run(["nm"] + flags + [path], capture_output=True, text=True,
                                   timeout=600)
            except (OSError, subprocess.SubprocessError):
                break
            lines = r.stdout.splitlines()
            if any(" T " in x or " t " in x for x in lines):
                break
    table = []
    for line in lines:
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "TtWw" and len(parts[1]) == 1:
            try:
                table.append((int(parts[0], 16), parts[2]))
            except ValueError:
                pass
    table.sort()
    return table


def symbolizer(maps, syms):
    starts = [m[0] for m in maps]
    tables = {}

    def name(pc):
        i = bisect.bisect_right(starts, pc) - 1
        if i < 0 or pc >= maps[i][1]:
            return "?"
        start, _, offset, path = maps[i]
        base = os.path.basename(path)
        if path not in tables:
            tables[path] = symbol_table(path, syms.get(base))
        table = tables[path]
        addr = pc - start + offset
        j = bisect.bisect_right(table, (addr, "\uffff")) - 1
        return "%s:%s" % (base, table[j][1]) if j >= 0 else base

    return name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--syms", action="append", default=[])
    ap.add_argument("--own", default="libtessera")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--under", help="only samples with a frame whose name contains this")
    ap.add_argument("--all", action="store_true", help="threads that stayed idle too")
    args = ap.parse_args()
    syms = dict(x.split("=", 1) for x in args.syms)
    maps, samples, main_tid = parse(args.file)
    # Frames 0 and 1 are the handler and the signal trampoline.
    samples = [(tid, pcs[2:]) for tid, pcs in samples if len(pcs) > 2]
    name = symbolizer(maps, syms)
    names = {pc: name(pc) for pc in {pc for _, pcs in samples for pc in pcs}}
    by_thread = collections.defaultdict(list)
    for tid, pcs in samples:
        stack = [names[pc] for pc in pcs]
        if args.under and not any(args.under in f for f in stack):
            continue
        by_thread[tid].append(stack)
    total = sum(len(v) for v in by_thread.values())
    print("%d samples" % total)

    def kind(tid, stacks):
        if tid == main_tid:
            return "main thread"
        if any("StreamWorker" in f for s in stacks[:50] for f in s):
            return "stream worker"
        if any("ThreadPool" in f for s in stacks[:50] for f in s):
            return "CPU thread pool"
        return "other"

    order = {"main thread": 0, "stream worker": 1, "CPU thread pool": 2, "other": 3}
    threads = sorted(by_thread.items(), key=lambda kv: (order[kind(*kv)], -len(kv[1])))
    for tid, stacks in threads:
        label = kind(tid, stacks)
        # A thread that ran no task nor any of our code in its samples is idle.
        busy = sum(1 for s in stacks if any(
            "NodeTask" in f or ("libtessera" in f and "_State_impl" not in f) for f in s))
        if len(stacks) < max(10, total // 200) or (label != "main thread" and not args.all
                                                   and busy < len(stacks) // 20):
            continue
        n = len(stacks)
        print("\n## %s %d: %d samples (%.0f%%), %.0f%% of them in Tessera's code" %
              (label, tid, n, 100.0 * n / total, 100.0 * busy / n))
        self_count = collections.Counter(s[0] for s in stacks if s)
        incl = collections.Counter()
        own = collections.Counter()
        for s in stacks:
            incl.update(set(s))
            inner = next((f for f in s if f.startswith(args.own)), "(outside %s)" % args.own)
            own[inner] += 1
        for title, counter in (("self", self_count), ("innermost " + args.own, own),
                               ("inclusive", incl)):
            print("\n%s:" % title)
            for name, c in counter.most_common(args.top):
                print("  %5.1f%%  %s" % (100.0 * c / n, name[:160]))


if __name__ == "__main__":
    main()
