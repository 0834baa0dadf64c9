"""Joins the JSON lines of Tessera's benchmark with a peer's and prints a table of
absolute figures and ratios (peer time / Tessera time: > 1 means Tessera is faster)."""
import json
import sys


def load(path):
    rows = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                r = json.loads(line)
                rows[r["name"]] = r
    return rows


def rate(r):
    unit = r["unit"]
    v = r["work"] / r["seconds"]
    if unit == "byte":
        return f"{v / 1e9:8.2f} GB/s"
    if unit == "flop":
        return f"{v / 1e9:8.1f} GFLOP/s"
    if unit == "token":
        return f"{v:8.1f} tokens/s"
    return f"{r['seconds'] * 1e6:8.3f} us/{unit}"


def main():
    ours, peer, peer_name = load(sys.argv[1]), load(sys.argv[2]), sys.argv[3]
    print(f"| benchmark | Tessera | {peer_name} | ratio ({peer_name} time / Tessera time) |")
    print("|---|---|---|---|")
    for name, r in ours.items():
        p = peer.get(name)
        ratio = f"{p['seconds'] / r['seconds']:.2f}" if p else "n/a"
        # A row measured against another peer says which (the peer's "peer" field).
        other = f" ({p['peer']})" if p and "peer" in p else ""
        print(f"| {name} | {rate(r)} | {rate(p) + other if p else 'n/a'} | {ratio} |")


if __name__ == "__main__":
    main()
