"""oscar-eval humaneval: running generated code (the sandbox's hostile probes are in
tests/test_sandbox.py) and what is recorded of its output, HumanEval's problems (their canonical
solutions pass our executor, broken ones fail), and an end-to-end run through llama-server."""
from __future__ import annotations

import doctest
import gzip
import json
import types
import uuid
from pathlib import Path

import pytest

from oscar.eval import evaluate, humaneval, sandbox
from oscar.eval.humaneval_preamble import PREAMBLE


@pytest.fixture(scope="module")
def contained() -> str:
    """The sandbox proves itself on this machine (else the tests say why and fail)."""
    return sandbox.check()


# ----------------------------------------------------------------------------- the executor

def test_correct_program_passes_wrong_fails(contained):
    ok = sandbox.run("def f(x):\n    return x * 2\nassert f(21) == 42\nprint('done')\n")
    assert ok.passed and ok.returncode == 0 and "done" in ok.output
    bad = sandbox.run("def f(x):\n    return x + 2\nassert f(21) == 42\n")
    assert bad.status == "failed" and bad.returncode == 1 and "AssertionError" in bad.output
    syntax = sandbox.run("def f(x)\n    return x\n")
    assert syntax.status == "failed" and "SyntaxError" in syntax.output


def test_infinite_loop_times_out_and_its_children_die(contained):
    marker = f"oscar-sandbox-test-{uuid.uuid4().hex}"
    src = ("import subprocess, sys\n"
           f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)  # {marker}'])\n"
           "while True:\n    pass\n")
    out = sandbox.run(src, timeout_s=2.0)
    assert out.status == "timeout" and not out.passed
    assert 2.0 <= out.seconds < 10.0
    left = []
    for d in Path("/proc").iterdir():
        try:
            if marker.encode() in (d / "cmdline").read_bytes():
                left.append(d.name)
        except OSError:
            pass
    assert not left, f"processes of the timed-out program still run: {left}"


def test_memory_limit(contained):
    out = sandbox.run("x = bytearray(3 << 30)\n", memory_mb=1024)
    assert out.status == "failed" and "MemoryError" in out.output


def test_failure_reason_is_a_short_printable_excerpt(contained):
    """What humaneval.json records of a failing program's output: its last line (the exception)
    with control characters, terminal escapes and bidirectional overrides replaced, cut to
    REASON_CHARS; the limit it was killed for; or the signal that ended it."""
    out = sandbox.run("raise AssertionError('wrong answer')\n")
    assert humaneval.failure_reason(out) == "AssertionError: wrong answer"
    hostile = sandbox.run("import sys\n"
                          "sys.stderr.write('fine\\n\\x1b]0;owned\\x07\\x1b[2J\\u202egnp.exe\\x00'\n"
                          "                 + 'A' * 1000 + '\\n')\n"
                          "raise SystemExit(1)\n")
    reason = humaneval.failure_reason(hostile)
    assert len(reason) == humaneval.REASON_CHARS and reason.endswith("...")
    assert reason.isprintable() and "\x1b" not in reason and "\u202e" not in reason and "\x00" not in reason
    assert reason.startswith("?]0;owned??[2J?gnp.exe?AAA")
    loud = sandbox.run("while True:\n    print('x' * 1000)\n", output_kb=64)
    assert humaneval.failure_reason(loud) == "output over 64 KiB"
    killed = sandbox.run("import os\nos.kill(os.getpid(), 9)\n")
    assert humaneval.failure_reason(killed) == "exit status 137 (killed by SIGKILL)"
    assert humaneval.failure_reason(sandbox.run("while True:\n    pass\n", timeout_s=1)) == "timeout"
    assert humaneval.failure_reason(sandbox.run("raise SystemExit(3)\n")) == "exit status 3"


# ----------------------------------------------------------------------------- problems

def test_problems_load_and_canonical_solutions_pass(contained):
    problems = humaneval.load_problems()
    assert len(problems) == humaneval.N_PROBLEMS
    assert [p.task_id for p in problems[:3]] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    assert problems[0].entry_point == "has_close_elements" and "def has_close_elements" in problems[0].prompt
    assert all(f"def {p.entry_point}" in p.prompt and "def check(candidate)" in p.test for p in problems)
    first = humaneval.load_problems(5)
    assert [p.task_id for p in first] == [p.task_id for p in problems[:5]]
    # independent reference: the data set's own canonical solutions pass its tests through our
    # program assembly and executor, and a body that returns nothing fails them
    with gzip.open(humaneval.data_file(), "rt") as f:
        canonical = [json.loads(ln)["canonical_solution"] for _, ln in zip(range(6), f)]
    for p, body in zip(problems, canonical):
        assert sandbox.run(humaneval.program(p, body)).passed, p.task_id
        out = sandbox.run(humaneval.program(p, "    return None\n"))
        assert out.status == "failed", p.task_id


def test_trim_cuts_at_the_next_top_level_statement():
    body = "    return x + 1\n"
    assert humaneval.trim(body + "\n\ndef other():\n    pass\n") == body + "\n"
    assert humaneval.trim(body + "\nif __name__ == '__main__':\n    main()") == body
    assert humaneval.trim(body + "\nprint(f(2))\n") == body
    assert humaneval.trim(body) == body
    nested = "    def helper(y):\n        return y\n    return helper(x)\n"
    assert humaneval.trim(nested) == nested  # an indented def is part of the body


def test_preamble_examples_hold_and_are_not_humaneval_problems():
    m = types.ModuleType("preamble")
    exec(PREAMBLE, m.__dict__)
    res = doctest.testmod(m)
    assert res.attempted >= 30 and res.failed == 0
    names = {p.entry_point for p in humaneval.load_problems()}
    defined = {ln.split("(")[0][4:] for ln in PREAMBLE.splitlines() if ln.startswith("def ")}
    assert len(defined) >= 12 and not defined & names


def test_bad_problem_files_and_counts_are_refused(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text(json.dumps({"task_id": "x/0", "prompt": "def f():\n", "entry_point": "f",
                             "test": "def check(c):\n    pass\n"}) + "\n" + '{"task_id": "x/1"}\n')
    with pytest.raises(humaneval.HumanEvalError, match="line 2 is not a HumanEval problem"):
        humaneval.load_problems(path=f)
    with pytest.raises(humaneval.HumanEvalError, match="give 1 to 164"):
        humaneval.load_problems(200)
    with pytest.raises(humaneval.HumanEvalError, match="give 1 to 164"):
        humaneval.load_problems(0)


def test_cli_refuses_bad_input(capsys, smollm2, tmp_path):
    assert evaluate.main(["humaneval", str(tmp_path / "none.gguf")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert evaluate.main(["humaneval", str(smollm2), "--kv", "f16,q9_9"]) == 1
    assert "KV type 'q9_9'" in capsys.readouterr().err
    assert evaluate.main(["humaneval", str(smollm2), "--problems", "500"]) == 1
    assert "--problems 500" in capsys.readouterr().err
    assert evaluate.main(["humaneval", str(smollm2), "--no-sandbox"]) == 1  # never runs generated code uncontained
    assert "--no-sandbox was removed" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        evaluate.main(["humaneval", "--help"])
    assert "pass@1" in capsys.readouterr().out


# ----------------------------------------------------------------------------- end to end

def test_end_to_end_smollm2(bin_dir, smollm2, tmp_path, capsys):
    """Three problems, f16 and an oscar2 cache with small windows (the preamble lies in the
    2-bit tier), through llama-server; the report's structure, the same problems for both,
    and the prompt cache computing the shared preamble once per configuration. A shorter
    preamble than the built-in one (its first four functions) keeps the test quick."""
    pre = tmp_path / "preamble.py"
    pre.write_text(PREAMBLE[:PREAMBLE.index("\ndef word_lengths")] + "\n")
    out = tmp_path / "he"
    rc = evaluate.main(["humaneval", str(smollm2), "--kv", "f16,oscar2:sink=4,recent=32", "--problems", "3",
                        "--preamble", str(pre), "-n", "48", "-t", "2", "--out", str(out), "-q"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "3 problems x 2 KV configurations" in err
    rep = json.loads((out / "humaneval.json").read_text())
    assert "partial" not in rep
    n_pre = rep["meta"]["preamble_tokens"]  # the server's /tokenize
    assert len(pre.read_text()) / 8 < n_pre < len(pre.read_text())
    assert [r["kv"] for r in rep["rows"]] == ["f16", "oscar2:sink=4,recent=32"]
    ids = [[r["task_id"] for r in rep["results"][kv]] for kv in ("f16", "oscar2:sink=4,recent=32")]
    assert ids[0] == ids[1] == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]
    f16, o2 = rep["rows"]
    assert f16["bits"] == 16.0 and 2.5 <= o2["bits"] < 8.0  # the 16-bit pool at ctx 4096 included
    for row, res in zip(rep["rows"], rep["results"].values()):
        assert row["passed"] == sum(r["passed"] for r in res) and row["problems"] == 3
        assert row["pass_at_1"] == pytest.approx(100 * row["passed"] / 3)
        assert all(r["status"] in ("passed", "failed", "timeout") and r["generated"] > 0 for r in res)
        assert all(r["prompt_cached"] + r["prompt_computed"] == r["prompt_tokens"] for r in res)
        # the preamble is computed for the first problem only, then taken from the slot's cache
        assert res[0]["prompt_cached"] == 0 and res[0]["prompt_computed"] > n_pre
        assert all(r["prompt_cached"] >= n_pre - 4 for r in res[1:]), res
        assert row["prompt_computed"] < row["prompt_tokens"] - 2 * (n_pre - 4)
    assert o2["gained"] + o2["lost"] <= 3 and 0 <= o2["same_completion"] <= 3
    assert rep["meta"]["problems"].startswith("first 3") and "bubblewrap" in rep["meta"]["sandbox"]
    md = (out / "humaneval.md").read_text()
    assert "| KV cache |" in md and "oscar2:sink=4,recent=32" in md
    # --reference: the f16 rows taken from that report; the oscar2 run alone gives the same row
    out2 = tmp_path / "he2"
    rc = evaluate.main(["humaneval", str(smollm2), "--kv", "oscar2:sink=4,recent=32", "--problems", "3",
                        "--preamble", str(pre), "-n", "48", "-t", "2", "--out", str(out2), "-q",
                        "--reference", str(out / "humaneval.json")])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "3 problems x 2 KV configurations" in err
    rep2 = json.loads((out2 / "humaneval.json").read_text())
    assert rep2["rows"][0] == f16 and rep2["results"]["f16"] == rep["results"]["f16"]
    assert "he/humaneval.json" in rep2["meta"]["reference"]
    again = rep2["rows"][1]
    for k in ("passed", "gained", "lost", "same_completion", "prompt_computed", "generated"):
        assert again[k] == o2[k], k
    assert ([r["completion"] for r in rep2["results"]["oscar2:sink=4,recent=32"]]
            == [r["completion"] for r in rep["results"]["oscar2:sink=4,recent=32"]])


def test_reference_of_other_settings_is_refused(smollm2, tmp_path, capsys):
    """--reference refuses a report of another model, other problems or settings, or one without
    f16 results, naming what differs, before anything runs (no server starts, nothing written)."""
    ref = tmp_path / "ref.json"
    problems = humaneval.load_problems(3)
    meta = {"model": str(smollm2), "model_bytes": smollm2.stat().st_size, "problems": "first 3 (HumanEval/0 to HumanEval/2)",
            "ctx": 4096, "n_predict": 384, "timeout_s": 10.0, "server_args": "none",
            "preamble": f"built-in, {len(PREAMBLE)} characters of solved functions"}
    results = [{"task_id": p.task_id, "passed": True, "completion": ""} for p in problems]
    good = {"meta": meta, "rows": [{"kv": "f16", "passed": 3}], "results": {"f16": results}}

    def run(rep, *extra):
        ref.write_text(json.dumps(rep))
        rc = evaluate.main(["humaneval", str(smollm2), "--kv", "oscar2", "--problems", "3", "-q",
                            "--out", str(tmp_path / "o"), "--reference", str(ref), *extra])
        assert rc == 1
        return capsys.readouterr().err

    assert "differs in n_predict: 384 there, 48 here" in run(good, "-n", "48")
    assert "differs in problems" in run(good | {"meta": meta | {"problems": "first 2 (HumanEval/0 to HumanEval/1)"}})
    assert "is of model" in run(good | {"meta": meta | {"model": "/elsewhere/other.gguf"}})
    assert "is of another file named" in run(good | {"meta": meta | {"model_bytes": 5}})
    assert "holds no f16 results" in run(good | {"results": {}})
    assert "nothing to run" in run(good, "--kv", "f16")
    ref.write_text("{not json")
    assert evaluate.main(["humaneval", str(smollm2), "--kv", "oscar2", "--problems", "3", "-q",
                          "--reference", str(ref)]) == 1
    assert "not a JSON report" in capsys.readouterr().err
    assert not (tmp_path / "o" / "humaneval.json").exists()
