"""Route a plan's actions through the action cache (buildgen/cache).

Every rule but gen gets the wrapper in front of its command (rules.cached); the file gets
the wrapper's start (`$cache`) and each action with implicit inputs lists them in
`$implicit_in`. Nothing about the cache's location or settings enters build.ninja: the
wrapper reads those at run time, so changing them re-runs nothing and no key depends on them.
"""

from __future__ import annotations

import dataclasses

from buildgen.ninja import rules
from buildgen.ninja.context import GenContext
from buildgen.ninja.plan import Action, BuildPlan


def with_cache(plan: BuildPlan, ctx: GenContext) -> BuildPlan:
    if ctx.worker:  # through a warm worker when there is one (buildgen/worker)
        start = ctx.through_worker("exec")
    else:
        start = (*ctx.python, "-m", "buildgen.cache", "exec")
    wrapper = (*start, "--root", ctx.path(ctx.root))
    return dataclasses.replace(
        plan,
        variables=(*plan.variables, (rules.CACHE, wrapper)),
        rules=tuple(rules.cached(rule) for rule in plan.rules),
        actions=tuple(_with_implicit_inputs(action) for action in plan.actions),
    )


def _with_implicit_inputs(action: Action) -> Action:
    """`$implicit_in`: the implicit inputs, each response file as `@file` (the wrapper
    hashes the file and what it lists: buildgen.cache.action)."""
    if action.rule in rules.UNCACHED or not action.implicit_inputs:
        return action
    listed = set(action.response_files)
    implicit = tuple(f"@{path}" if path in listed else path for path in action.implicit_inputs)
    variables = (*action.variables, (rules.IMPLICIT_IN, implicit))
    return action.evolve(variables=variables)
