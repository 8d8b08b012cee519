"""docs/results.md as code (issue 55): the headline table and every met/missed verdict are printed
by benchmarks/headline.py from committed raw files, and this test reruns it. Pure file reads:
no measurement, no fit."""
from __future__ import annotations

import pytest

from conftest import benchmark_module


def test_every_generated_figure_of_results_md_is_what_the_raw_files_give():
    with benchmark_module("headline") as headline:
        problems = headline.differences(headline.RESULTS.read_text())
    assert not problems, ("docs/results.md disagrees with its raw files (fix the script or the "
                          "data, then `python benchmarks/headline.py --write`):\n"
                          + "\n".join(problems))


def test_a_changed_figure_a_stray_verdict_or_a_lost_piece_is_named():
    with benchmark_module("headline") as headline:
        text = headline.RESULTS.read_text()
        piece = "<!-- fig:zen4.rr-verdict -->"
        at = text.index(piece) + len(piece)
        changed = text[:at] + text[at:].replace("0.69x", "0.60x", 1)
        assert "zen4.rr-verdict: differs from what the raw files give" in \
            headline.differences(changed)
        stray = text.replace("## Cost models", "The target is met.\n\n## Cost models", 1)
        assert any("outside the generated pieces: The target is met." in p
                   for p in headline.differences(stray))
        start = text.index("<!-- fig:pipeline.quiet-run -->")
        end = text.index("<!-- /fig:pipeline.quiet-run -->") + len("<!-- /fig:pipeline.quiet-run -->")
        lost = text[:start] + "Run 3." + text[end:]
        assert "pipeline.quiet-run: not in docs/results.md" in headline.differences(lost)
        twice = text + "\n<!-- fig:headline -->x<!-- /fig:headline -->\n"
        with pytest.raises(ValueError, match="'headline' appears twice"):
            headline.differences(twice)


def test_the_noise_rule_needs_three_values_and_states_its_test():
    with benchmark_module("_evidence") as evidence:
        two = evidence.Sample.of([0.10, 0.12])
        assert two.beyond() is None and two.test() == "n = 2: not decidable"
        # t = 4.2 with 4 degrees of freedom: beyond the 2.78 of a two-sided 5% test
        five = evidence.Sample.of([0.010, 0.020, 0.015, 0.005, 0.025])
        assert five.beyond() and five.test() == "t = 4.2, n = 5: beyond the noise"
        assert five.text() == "0.015 ± 0.004"
        assert evidence.Sample.of([0.3, -0.1, 0.1]).beyond() is False
        assert "not decidable" in evidence.welch(two, five)
        assert evidence.Sample.of([0.5]).text() == "0.500 (n = 1)"
