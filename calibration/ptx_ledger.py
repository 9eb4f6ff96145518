#!/usr/bin/env python3
"""The ledger: every PTX instruction form the kernel's configs issue, beside the public kernels that ran the same form
on a B200 and passed, and the forms no public kernel has run on silicon.

    python -m calibration.ptx_ledger collect [--sources DIR] [--only TEXT]
    python -m calibration.ptx_ledger table [--space]

`collect` builds every public file that passed on a B200 (calibration.public.public_files: a file with published B200
times; its sources as `python -m calibration.public sources` puts them) through harness.runner without emulating
(its own host code, its own launches, recorded), plus NVIDIA's CuTe DSL block-scaled example where its source is at
hand (calibration.nvidia_example.find_example), and keeps each one's instruction forms (emu.forms) in
calibration/public_forms.json: ~100 s of nvcc per CUDA file the first time, then the compile cache. `table` compiles
the configs the first call may run for a task shape of either problem (submission.config_chain) and writes
docs/ptx_ledger.md and docs/ptx_ledger.json: per form, the configs that issue it and its precedents.

A form is an opcode with every modifier and the shape of its operands (emu.forms); two kernels share one when the
hardware is asked for the same thing, up to run-time values (descriptor bits, tensor-map types, immediates), which a
form does not see: a shared form is evidence, not proof. Every form here is compiled (read off PTX); what ran on a B200
is the public files' authors' claim, cited in docs/public_files.md.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORMS_JSON = Path(__file__).with_name("public_forms.json")
LEDGER_MD = REPO / "docs" / "ptx_ledger.md"
LEDGER_JSON = REPO / "docs" / "ptx_ledger.json"
# the families the ledger spells out whatever their precedent (the asynchronous and cluster machinery: where a form no
# one ran could fail); plain ALU and control forms are counted, and listed only where no public kernel issues them
WATCHED = ("tcgen05.", "cp.async", "mbarrier.", "barrier.cluster", "fence.", "griddepcontrol.", "st.async", "mapa.",
           "elect.", "setmaxnreg", "prefetch.", "multimem.", "red.", "atom.", "ld.shared::cluster", "st.shared::cluster")


def passed_on_a_b200(entry: dict, outcome: dict | None = None) -> str:
    """Why a public file counts as run on a B200 and passed ('' if it does not): the B200 outcome calibration/outcomes.json
    declares for it (`outcome`: passed, with its pairing's strength; any failure excludes it), else published times (its
    points', or a runner output's mean)."""
    if outcome is not None:
        if outcome["outcome"]["class"] != "passed":
            return ""
        return (f"B200 outcome passed ({outcome['source'].get('output', 'published times')}, "
                f"{outcome['pairing']['strength']} pairing: calibration/outcomes.json)")
    if entry.get("points"):
        return f"B200 times published (points {', '.join(entry['points'][:3])}{'...' if len(entry['points']) > 3 else ''})"
    published = entry.get("published") or {}
    if published.get("outcome", "passed" if published.get("mean_us") else "") == "passed":
        return f"B200 runner output {published.get('output', '')} (mean {published.get('mean_us')} us)"
    return ""


def collect(sources=None, only: str | None = None, progress=print) -> dict:
    """The instruction forms of every public file that passed on a B200 (and NVIDIA's example), by file."""
    from calibration import outcomes
    from calibration.public import public_files, sources_dir, task_shapes
    from harness.runner import run_cases

    data = json.loads(FORMS_JSON.read_text()) if FORMS_JSON.exists() else {"files": {}}
    declared = {(e["repo"], e["commit"], e["path"]): e for e in outcomes.declared()["files"]}
    for entry in public_files():
        f = entry["file"]
        key = f"{f.repo}@{f.commit[:8]} {f.path}"
        why = passed_on_a_b200(entry, declared.get((f.repo, f.commit, f.path)))
        if not why:
            data["files"].pop(key, None)
        if not why or (only and only not in key):
            continue
        path = f.local(sources_dir(sources))
        if not path.is_file():
            progress(f"ptx_ledger: {key}: skipped ({path} is absent: `python -m calibration.public sources`)")
            continue
        shape, _ = task_shapes(entry["problem"])
        (res,) = run_cases(path, [(shape, "leaderboard", 1111)], entry["problem"], emulate=False)
        kernels = {x["kernel"][:80]: x["forms"] for x in res.launches}
        if not kernels or any(v is None for v in kernels.values()):
            progress(f"ptx_ledger: {key}: no forms ({res.summary()})")
            continue
        data["files"][key] = {"url": f.url, "problem": entry["problem"], "b200": why,
                              "forms": sorted({form for forms in kernels.values() for form in forms})}
        progress(f"ptx_ledger: {key}: {len(data['files'][key]['forms'])} forms in {len(kernels)} kernel(s)")
    for name, forms in nvidia_example_forms(progress).items():
        data["files"][name] = forms
    data["about"] = ("Instruction forms (emu.forms) of the public kernels that passed on a B200, made by `python -m "
                     "calibration.ptx_ledger collect`: compiled from each file's own build, nothing emulated.")
    FORMS_JSON.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return data


def nvidia_example_forms(progress=print) -> dict:
    """NVIDIA's CuTe DSL persistent block-scaled GEMM example, every calibration config, where its source is at hand."""
    from calibration import nvidia_example as nv
    from emu.forms import forms

    example, why = nv.find_example()
    if example is None:
        progress(f"ptx_ledger: NVIDIA's example: skipped ({why})")
        return {}
    out = {}
    for cfg in nv.CONFIGS.values():
        ptx = nv.compile_artifacts(example, cfg) / "kernel.ptx"
        out[f"NVIDIA/cutlass {nv.EXAMPLE_IN_REPO.rsplit('/', 1)[-1]} {cfg.name}"] = {
            "url": f"https://github.com/NVIDIA/cutlass/blob/main/{nv.EXAMPLE_IN_REPO}", "problem": "nvfp4_gemm",
            "b200": "NVIDIA's example (B200-verified, docs/design.md \"Functional calibration\")",
            "forms": sorted(forms(ptx.read_text()))}
    return out


def kernel_configs(space: bool = False) -> dict:
    """{config name: (config, roles)} for every config the first call may run at a task shape of either problem, and
    with `space` every config of TUNE_SPACE and GEMM_TUNE_SPACE too (role "tune space": which config would issue the
    fewest forms no public kernel ran, the question SAFE_CONFIG answers)."""
    from harness.verdict import load_submission
    from problem_files import task_path
    from utils import load_task

    sub = load_submission(REPO / "submission.py")
    out = {}
    for problem in (sub.DUAL_GEMM_PROBLEM, sub.GEMM_PROBLEM):
        task = load_task(task_path(problem))
        for case in task["benchmarks"] + task["tests"]:
            shape = (case["m"], case["n"], case["k"], case["l"])
            for place, cfg in enumerate(sub.config_chain(*shape, problem)):
                role = "first" if place == 0 else "chain"
                entry = out.setdefault(cfg.name, (cfg, set()))
                entry[1].add(role)
    for problem, cfg in sub.SAFE_CONFIG.items():
        out.setdefault(cfg.name, (cfg, set()))[1].add("safe")
    if space:
        for cfg in (*sub.TUNE_SPACE, *sub.GEMM_TUNE_SPACE):
            out.setdefault(cfg.name, (cfg, set()))[1].add("tune space")
    return out


def table(space: bool = False) -> dict:
    from emu.forms import canonical_form, forms
    from harness.capture import compile_artifacts

    public = json.loads(FORMS_JSON.read_text())["files"] if FORMS_JSON.exists() else {}
    by_form: dict = {}
    for name, rec in public.items():
        for form in sorted({canonical_form(f) for f in rec["forms"]}):
            by_form.setdefault(form, []).append(name)
    opcodes = {form.split(" ", 1)[0] for form in by_form}
    configs = {}
    for name, (cfg, roles) in kernel_configs(space).items():
        ptx = (compile_artifacts(str(REPO / "submission.py"), cfg) / "kernel.ptx").read_text()
        configs[name] = {"roles": sorted(roles), "forms": forms(ptx)}
    rows = {}
    for name, rec in configs.items():
        for form, count in rec["forms"].items():
            row = rows.setdefault(form, {"configs": {}, "precedents": sorted(by_form.get(form, [])),
                                         "opcode_precedented": form.split(" ", 1)[0] in opcodes})
            row["configs"][name] = count
    unprecedented = {form: row for form, row in rows.items() if not row["precedents"]}
    per_config = {name: {"roles": rec["roles"], "forms": len(rec["forms"]),
                         "unprecedented": sorted(f for f in rec["forms"] if f in unprecedented)}
                  for name, rec in configs.items()}
    result = {"label": "compiled", "public_files": {k: {"url": v["url"], "b200": v["b200"]} for k, v in public.items()},
              "configs": per_config, "forms": rows}
    LEDGER_JSON.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    LEDGER_MD.write_text(markdown(result))
    return result


def _short(name: str) -> str:
    return name.split("@")[0].split("/")[0] + ":" + name.rsplit(" ", 1)[-1] if "@" in name else name


def markdown(result: dict) -> str:
    configs, rows, public = result["configs"], result["forms"], result["public_files"]
    lines = [
        "# The PTX ledger: what the kernel issues that no public kernel has run on a B200",
        "",
        "Made by `python -m calibration.ptx_ledger table` from calibration/public_forms.json (`... collect`); "
        "calibration/ptx_ledger.py's docstring says what a form is. Every form is **compiled** (read off PTX); "
        f"a precedent is one of the {len(public)} public kernels below that passed on a B200 (their authors' published "
        "runs, docs/public_files.md), issuing the same form. A shared form is evidence, not proof: run-time values "
        "(descriptor bits, tensor-map data types) are not part of it.",
        "",
        "## Per config (those the first call may run: submission.config_chain)",
        "",
        "Asynchronous and cluster forms (tensor memory, TMA, mbarriers, cluster barriers, fences, PDL, DSMEM: where a form "
        "no one ran could fail) apart from the rest (arithmetic and plain loads and stores, which every CUDA compiler "
        "emits on every GPU; listed for completeness).",
        "",
        "| config | role | forms | asynchronous / cluster forms no public B200 kernel issued | other forms without one |",
        "|---|---|---|---|---|",
    ]
    chain = {name: rec for name, rec in configs.items() if rec["roles"] != ["tune space"]}
    for name, rec in chain.items():
        watched = [f for f in rec["unprecedented"] if f.startswith(WATCHED)]
        other = [f for f in rec["unprecedented"] if not f.startswith(WATCHED)]
        lines.append(f"| `{name}` | {', '.join(rec['roles'])} | {rec['forms']} | "
                     + (", ".join(f"`{f}`" for f in watched) or "none") + " | "
                     + (", ".join(f"`{f}`" for f in other) or "none") + " |")
    if len(chain) < len(configs):  # table --space: where the safe configs stand among every tunable config
        for problem in ("nvfp4_dual_gemm", "nvfp4_gemm"):
            pool = {n: sum(f.startswith(WATCHED) for f in r["unprecedented"]) for n, r in configs.items()
                    if n.startswith("gemm_") == (problem == "nvfp4_gemm")}
            fewest = min(pool.values())
            lines += ["", f"{problem}: of its {len(pool)} tunable and chain configs, the fewest asynchronous / cluster "
                      f"forms without a precedent is {fewest} ({', '.join(f'`{n}`' for n, c in pool.items() if c == fewest)}); "
                      "the safe config: " + ", ".join(f"`{n}` {pool[n]}" for n, r in chain.items()
                                                       if "safe" in r["roles"] and n in pool) + "."]
    lines += ["", "## Forms without a precedent (in the chains' configs)", "",
              "| form | configs issuing it | same opcode, other operands, in a public kernel |", "|---|---|---|"]
    for form, row in sorted(rows.items()):
        if not row["precedents"] and set(row["configs"]) & set(chain):
            lines.append(f"| `{form}` | {', '.join(sorted(set(row['configs']) & set(chain)))} | "
                         f"{'yes' if row['opcode_precedented'] else 'no'} |")
    lines += ["", "## The asynchronous and cluster forms, with their precedents", "",
              "| form | configs | precedents (public kernels that passed on a B200) |", "|---|---|---|"]
    for form, row in sorted(rows.items()):
        if form.startswith(WATCHED) and set(row["configs"]) & set(chain):
            prec = row["precedents"]
            shown = ", ".join(_short(p) for p in prec[:6]) + (f" and {len(prec) - 6} more" if len(prec) > 6 else "")
            lines.append(f"| `{form}` | {len(set(row['configs']) & set(chain))} | {shown or '**none**'} |")
    lines += ["", "## The public kernels (precedents)", ""]
    lines += [f"- [{name}]({rec['url']}): {rec['b200']}" for name, rec in sorted(public.items())]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--sources", default=None)
    c.add_argument("--only", default=None)
    t = sub.add_parser("table")
    t.add_argument("--space", action="store_true", help="every TUNE_SPACE / GEMM_TUNE_SPACE config too")
    args = ap.parse_args(argv)
    if args.cmd == "collect":
        collect(args.sources, args.only)
        return 0
    result = table(args.space)
    for name, rec in result["configs"].items():
        print(f"{name}: {rec['forms']} forms, {len(rec['unprecedented'])} without a public B200 precedent")
    print(f"wrote {LEDGER_MD.relative_to(REPO)} and {LEDGER_JSON.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
