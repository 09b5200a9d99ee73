"""Every pending reason of FORMATS.md section 5 and the field guide's table has an explanation."""

from __future__ import annotations

import pytest

from jobs.pending_reasons import diagnose_output, explain_pending_reason, explain_submit_error

FORMATS_REASONS = [
    "Resources",
    "Priority",
    "ReqNodeNotAvail",
    "Dependency",
    "DependencyNeverSatisfied",
    "QOSMaxJobsPerUserLimit",
    "AssocGrpGRES",
    "AssociationJobLimit",
    "PartitionNodeLimit",
    "PartitionTimeLimit",
    "JobHeldAdmin",
    "JobHeldUser",
    "BeginTime",
    "NodeDown",
    "InvalidAccount",
    "InvalidQOS",
    "WaitingForScheduling",
]


@pytest.mark.parametrize("reason", FORMATS_REASONS)
def test_every_listed_reason_is_known_with_an_action(reason):
    e = explain_pending_reason(reason)
    assert e is not None
    assert e.known is True
    assert e.code == reason
    assert str(e.explanation) and len(e.actions) >= 1


def test_req_node_not_avail_names_the_unavailable_nodes():
    e = explain_pending_reason("(ReqNodeNotAvail, UnavailableNodes:n[01-02])", job_id=812)
    assert (e.code, e.detail, e.who) == ("ReqNodeNotAvail", "n[01-02]", "admin")
    assert "scontrol show job 812" in e.commands


@pytest.mark.parametrize(
    ("reason", "title"),
    [
        ("AssocGrpGRES", "Limit on GPUs reached"),
        ("AssocGrpCpuLimit", "Limit on CPUs reached"),
        ("AssocMaxJobsLimit", "Limit on running jobs reached"),
        ("QOSGrpNodeLimit", "Limit on nodes reached"),
        ("QOSMaxGRESPerUser", "Limit on GPUs reached"),
        ("QOSMaxWallDurationPerJobLimit", "Limit on run time reached"),
        ("AssocGrpGRESRunMinutes", "Limit on GPU-minutes of running jobs reached"),
    ],
)
def test_assoc_and_qos_family_explained_by_prefix(reason, title):
    e = explain_pending_reason(reason)
    assert (str(e.title), e.known) == (title, True)


def test_group_and_per_user_limits_are_told_apart():
    assert "everyone sharing your Slurm account" in str(explain_pending_reason("AssocGrpGRES").explanation)
    assert "you personally" in str(explain_pending_reason("QOSMaxGRESPerUser").explanation)


def test_unknown_reason_gets_the_pending_checklist_and_empty_reason_nothing():
    e = explain_pending_reason("SomethingNew", job_id=5)
    assert (e.known, e.code) == (False, "SomethingNew")
    assert e.commands == ("scontrol show partition", "sinfo -R", "sprio -j 5")
    assert explain_pending_reason("") is None
    assert explain_pending_reason(None) is None


def test_submit_errors_explained():
    e = explain_submit_error("Invalid account or account/partition combination specified")
    assert e.code == "InvalidAccount"
    assert "sacctmgr show user $USER withassoc" in e.commands
    assert explain_submit_error("Requested node configuration is not available").code == "NodeConfig"
    assert explain_submit_error("something else") is None


def test_output_signs_of_the_troubleshooting_table():
    text = (
        "step 10\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
        "torch.distributed.DistNetworkError: init_process_group timed out\n"
    )
    assert [e.code for e in diagnose_output(text)] == ["CudaOOM", "DistInitTimeout"]
    assert diagnose_output("all good\n") == []
