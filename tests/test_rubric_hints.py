"""RLCER's inference option: the policy's own rubrics go into the prompt as hints."""

from types import SimpleNamespace

from evals import rubric_hints


def test_rubrics_written_by_the_policy_become_hints(monkeypatch):
    calls = []

    def fake_generate(model, tokenizer, prompts, *, num_samples=1, greedy=False, **kw):
        calls.append(list(prompts))
        if len(calls) == 1:  # the first answer
            return [[" 2 + 3 = 5. The answer is \\boxed{5}."] for _ in prompts]
        if len(calls) == 2:  # the rubricator: one good reply, one malformed
            return [[' [{"criterion": "shows every intermediate step", "points": 3}]'], ["not json"]]
        return [[" The answer is \\boxed{5}."] * num_samples for _ in prompts]

    monkeypatch.setattr(rubric_hints, "generate", fake_generate)
    rows = [{"prompt": "Problem: 2 + 3?\nSolution:", "answer": "5"},
            {"prompt": "Problem: 1 + 1?\nSolution:", "answer": "3"}]
    ev = SimpleNamespace(batch_size=4, max_new_tokens=8, k=2, temperature=1.0)
    out = rubric_hints.hinted_pass_at_1(None, None, rows, "{problem}{solution}\nRubrics:", ev, 0, 16)
    assert calls[1][0] == "Problem: 2 + 3?\nSolution: 2 + 3 = 5. The answer is \\boxed{5}.\nRubrics:"
    hinted = calls[2]
    assert hinted[0] == ("Problem: 2 + 3?\nHints: aim for: shows every intermediate step (+3).\n"
                         "Solution:")
    assert hinted[1] == rows[1]["prompt"]  # a malformed reply gives no hints, not a crash
    assert out == {"arith_hints/pass@1": 0.5, "arith_hints/rubric_parse_rate": 0.5,
                   "arith_hints/n": 2.0}
