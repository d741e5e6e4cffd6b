"""--all lists every instance of each race, the first being the reported example."""

import pytest

from gpurace import api
from gpurace.launch.cuda import load_cuda_launch
from tests.corpus import cases

RACY = [c for c in cases("wgsl", ".wgsl") if c.load()[1].expect["verdict"] != "clean"]


@pytest.mark.parametrize("case", RACY, ids=lambda c: c.id)
def test_every_instance_listed_first_is_the_example(case):
    source, spec = case.load()
    assert_listed(api.check(source, spec, path=str(case.kernel), all_instances=True))


def assert_listed(report):
    """Each race's instances listed, each once, the example first."""
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


HOST_ORDERED = ["tmem_mma_early_read_race", "cp_async_own_mbarrier_race"]


@pytest.mark.parametrize(
    "case", [c for c in cases("cuda", ".cu") if c.id in HOST_ORDERED], ids=lambda c: c.id
)
def test_races_decided_on_the_host_list_the_hosts_instances(case):
    """Where release/acquire is decided on the host (sim's CUDA launches with mbarriers or
    copies in flight), --all lists the reference's instances: a thread's own pairs with
    its operation in flight too (tmem_mma_early_read_race's row 0 was missing: 508 of
    512), each once, the example first."""
    spec = load_cuda_launch(case.launch_path)
    report = api.check(case.kernel.read_text(), spec, path=str(case.kernel), all_instances=True)
    assert report.scope.ordering == "host"
    assert_listed(report)
