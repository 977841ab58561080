"""Peak and steady-state RSS from the launcher's samples and the workload's phase
marks (docs/design/bench.md, "Footprint"). All values in KiB."""
import statistics


def load(path):
    samples, marks = [], []
    with open(path) as f:
        for line in f:
            if line.startswith("# mark "):
                _, _, t, name = line.split(None, 3)
                marks.append((float(t), name.strip()))
            elif line[:1].isdigit():
                t, r, a = line.split()
                samples.append((float(t), int(r), int(a)))
    return samples, marks


def last_before(samples, t, after=-1.0):
    """The last sample taken in (after, t], or None."""
    best = None
    for s in samples:
        if after < s[0] <= t:
            best = s
        elif s[0] > t:
            break
    return best


def derive(path, steady_kind, measure):
    samples, marks = load(path)
    if not samples:
        return {"samples": 0}
    peak = max(s[1] for s in samples)
    d = {
        "samples": len(samples),
        "hz": measure.get("rss_hz", 0),
        "peak_kb": max(peak, int(measure.get("maxrss_kb", 0) or 0)),
        "peak_sampled_kb": peak,
        "anon_peak_kb": max(s[2] for s in samples),
        "steady_kind": steady_kind,
    }
    end = samples[-1][0]
    if steady_kind == "idle":
        ends = []
        for i, (t, name) in enumerate(marks):
            if name != "idle":
                continue
            nxt = marks[i + 1][0] if i + 1 < len(marks) else end + 1
            s = last_before(samples, nxt - 1e-6, t)
            if s:
                ends.append(s)
        use = ends[1:] if len(ends) > 1 else ends
        if use:
            d["steady_kb"] = int(statistics.mean(s[1] for s in use))
            d["steady_anon_kb"] = int(statistics.mean(s[2] for s in use))
            d["idle_end_kb"] = [s[1] for s in ends]
    elif steady_kind == "peaktrough":
        phases = []
        for i, (t, name) in enumerate(marks):
            nxt = marks[i + 1][0] if i + 1 < len(marks) else end + 1
            inside = [s for s in samples if t <= s[0] < nxt]
            phases.append((name, t, nxt, inside))
        steady = [p for p in phases if p[0] == "steady" and p[3]]
        peaks = [p for p in phases if p[0] == "peak" and p[3]]
        troughs = [p for p in phases if p[0] == "trough" and p[3]]
        if steady:
            d["steady_kb"] = steady[0][3][-1][1]
        if peaks:
            d["phase_peak_kb"] = max(s[1] for p in peaks for s in p[3])
        if troughs:
            d["after_trough_kb"] = int(statistics.mean(p[3][-1][1] for p in troughs))
            d["after_trough_each_kb"] = [p[3][-1][1] for p in troughs]
        if "steady_kb" in d and "after_trough_kb" in d and d["steady_kb"]:
            d["trough_over_steady"] = d["after_trough_kb"] / d["steady_kb"]
    elif steady_kind == "rounds":
        per_round = []
        for t, name in marks:
            if name == "round":
                s = last_before(samples, t)
                if s:
                    per_round.append(s[1])
        if per_round:
            d["round_kb"] = per_round
            d["steady_kb"] = per_round[-1]
            if len(per_round) >= 3:
                d["growth_kb"] = per_round[-1] - per_round[1]
    if "steady_kb" not in d:
        half = [s for s in samples if s[0] >= end / 2]
        if half:
            d["steady_kb"] = int(statistics.median(s[1] for s in half))
            d["steady_anon_kb"] = int(statistics.median(s[2] for s in half))
    return d
