"""The forms the runner derives for a plugin are its written form, reason texts, codes and scores alike.

A plugin writes one batch form; the runner (``runner.Runner``) derives what else it needs:

* a few-rows filter or score from the batch form (``filters_few`` / ``scores_few`` of a plugin
  without ``filter_few`` / ``score_few``): every built-in filter and score plugin is run through
  the runner as a batch-only view of itself, and the derived few-rows answer on any sorted set of
  rows must be the batch answer on those rows, and the batch answer over every row restricted
  to those rows (so a batch form's answer on a row depends on that row alone: verdicts and codes
  for every plugin, reason texts for all but CPUOrchestration and ZoneCapacity, whose text
  summarizes the rows refused together). ``test_few_rows.py`` holds the plugins' own few-rows
  forms to the same batch forms.
* for a plugin with no batch form (NodeResourceTopologyMatch), the batch filter and score node by
  node (``filter_rows`` / ``score_rows``) and the few-rows forms from the per-node form: all equal
  the per-node ``filter`` (its Status as a reason, code included) and ``score``.

On the random clusters and pods of ``test_few_rows.py``.
"""

from __future__ import annotations

import numpy as np
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.scheduler.test_few_rows import Setting, as_reasons, codes, few_pods, plugins, settings_
from tests.scheduler.test_vector_equivalence import SETTINGS
from toposched.scheduler.framework import CycleState, Profile
from toposched.scheduler.profile_setup import load_profile
from toposched.scheduler.runner import Runner
from toposched.scheduler.scheduler import Scheduler
from toposched.scheduler.status import reason_of

# Filters whose batch reason text is one summary of the rows refused together ("the one reason of
# the refused rows, else the general one"): their verdicts and codes depend on each row alone, the
# text on which rows were judged together.
SUMMARIZING = {"CPUOrchestration", "ZoneCapacity"}


class BatchFilter:
    """Only the batch filter of ``plugin``: the runner must derive its few-rows form."""

    def __init__(self, plugin) -> None:
        self.name = plugin.name
        self.filter_all = plugin.filter_all


class BatchScore:
    """Only the batch score of ``plugin``: the runner must derive its few-rows form."""

    def __init__(self, plugin) -> None:
        self.name = plugin.name
        self.score_all = plugin.score_all


@settings(max_examples=40, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_few_rows_forms_derived_from_the_batch_forms_are_the_batch_forms(setting: Setting, data: st.DataObject) -> None:
    cluster = setting.build()
    scheduler = Scheduler(cluster, load_profile("toposched"))
    filters, scores = plugins()
    views = Profile("batch-only", filters=[BatchFilter(p) for p in filters], scores=[(BatchScore(p), 1) for p in scores])
    for i in range(3):
        pod = data.draw(few_pods(f"p{i}"), label=f"pod {i}")
        scheduler.table.refresh()
        table = scheduler.table
        runner = Runner(cluster, views, table)
        assert not any(hasattr(p, "filter_few") or hasattr(p, "score_few") for p in runner.filters + runner.scores)
        every = np.arange(table.size)
        rows = sorted(data.draw(st.sets(st.sampled_from(every.tolist()), min_size=1), label="rows"))
        state = CycleState(cluster=cluster)
        refused = False
        for plugin in scheduler.profile.pre_filters:
            refused = refused or not plugin.pre_filter(state, pod).is_success
        for index, plugin in enumerate(filters):
            derived = runner.filters_few[index](state, pod, rows)
            batch = as_reasons(*plugin.filter_all(state, pod, table, np.array(rows, dtype=np.int64)))
            assert derived == batch and codes(derived) == codes(batch), f"{plugin.name} on rows {rows}"
            whole = as_reasons(*plugin.filter_all(state, pod, table, every))
            restricted = [whole[r] for r in rows]
            assert codes(derived) == codes(restricted), f"{plugin.name} on rows {rows}"  # verdicts and codes
            if plugin.name not in SUMMARIZING:
                assert derived == restricted, f"{plugin.name} on rows {rows}"
        if not refused:
            for index, plugin in enumerate(scores):
                whole_scores = plugin.score_all(state, pod, table, every).tolist()
                derived_scores = runner.scores_few[index](state, pod, rows)
                assert derived_scores == [whole_scores[r] for r in rows], f"{plugin.name} on rows {rows}"
        decision = scheduler.schedule(pod, now=10.0 + i)
        if decision.node is not None and data.draw(st.booleans(), label="bind"):
            scheduler.bound(pod, now=10.0 + i)


@settings(max_examples=40, **SETTINGS)
@given(setting=settings_(), data=st.data())
def test_forms_derived_from_the_per_node_forms_are_the_per_node_forms(setting: Setting, data: st.DataObject) -> None:
    cluster = setting.build()
    scheduler = Scheduler(cluster, load_profile("nrt-match"))
    runner = scheduler.runner
    (index, plugin), = [(i, p) for i, p in enumerate(runner.filters) if p.name == "NodeResourceTopologyMatch"]
    (score_index, _), = [(i, s) for i, (s, _) in enumerate(runner.scores) if s is plugin]
    assert not runner.batch_filter[index] and not runner.batch_score[score_index]
    for i in range(3):
        pod = data.draw(few_pods(f"p{i}"), label=f"pod {i}")
        runner.advance(10.0 + i)
        scheduler.table.refresh()
        table = scheduler.table
        every = np.arange(table.size)
        rows = sorted(data.draw(st.sets(st.sampled_from(every.tolist()), min_size=1), label="rows"))
        state, _ = runner.pre_filter(pod)
        per_node = [plugin.filter(state, pod, cluster.nodes[table.names[r]]) for r in rows]
        expected = [None if s.is_success else reason_of(s) for s in per_node]
        batch = as_reasons(*runner.filter_rows(index, state, pod, np.array(rows, dtype=np.int64)))
        few = runner.filters_few[index](state, pod, rows)
        assert batch == few == expected, f"rows {rows}"
        assert codes(batch) == codes(few) == codes(expected) == [None if s.is_success else s.code for s in per_node]
        for status in per_node:
            event(f"NodeResourceTopologyMatch: {status.code.label}")
        scores = [plugin.score(state, pod, cluster.nodes[table.names[r]], table) for r in rows]
        assert runner.score_rows(score_index, state, pod, np.array(rows, dtype=np.int64)).tolist() == scores
        assert runner.scores_few[score_index](state, pod, rows) == scores
        decision = scheduler.schedule(pod, now=10.0 + i)
        if decision.node is not None and data.draw(st.booleans(), label="bind"):
            scheduler.bound(pod, now=10.0 + i)
