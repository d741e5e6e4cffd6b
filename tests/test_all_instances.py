"""--all lists every instance of each race, the first being the reported example."""

import pytest

from gpurace import api
from tests.corpus import cases

RACY = [c for c in cases("wgsl", ".wgsl") if c.load()[1].expect["verdict"] != "clean"]


@pytest.mark.parametrize("case", RACY, ids=lambda c: c.id)
def test_every_instance_listed_first_is_the_example(case):
    source, spec = case.load()
    report = api.check(source, spec, path=str(case.kernel), all_instances=True)
    assert report.races
    assert set(report.instances) == {r.key for r in report.races}
    for race in report.races:
        listed = report.instances[race.key]
        assert len(listed) == race.instances
        first = listed[0]
        example = (race.var, race.address, race.group_a, race.lid_a, race.group_b, race.lid_b)
        assert (first.var, first.address, first.group_a, first.lid_a, first.group_b,
                first.lid_b) == example  # fmt: skip
        assert len({(i.var, i.address, i.group_a, i.epoch_a) for i in listed}) == len(listed)


def test_without_all_no_instances_are_listed():
    case = RACY[0]
    source, spec = case.load()
    assert api.check(source, spec, path=str(case.kernel)).instances == {}
