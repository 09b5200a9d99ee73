"""Forms of the job and node-operation pages. They parse and offer choices; the rules live in
jobs.services (job_submit validates against the synced partitions, action_request checks roles)."""

from __future__ import annotations

import re
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Max, QuerySet
from django.utils.translation import gettext_lazy as _

from inventory.models import Card, Cluster, Node
from jobs.models import ClusterAccount, JobTemplate, NodeState, Partition, Runbook

#: The fields a template can preset and lock (names of JobSubmitForm fields).
TEMPLATE_FIELDS = (
    "partition",
    "account",
    "nodes",
    "ntasks_per_node",
    "cpus_per_task",
    "gpu_type",
    "gpus",
    "time_limit",
    "work_dir",
    "output",
    "environment",
    "script",
)

_TIME_RE = re.compile(r"^(?:(?P<d>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?$")


def parse_time_limit(text: str) -> int | None:
    """Slurm's time formats to whole minutes: ``90``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``,
    ``D-HH:MM``, ``D-HH:MM:SS`` (seconds round up). Empty means the partition's default."""
    text = (text or "").strip()
    if not text:
        return None
    m = _TIME_RE.match(text)
    if not m:
        raise ValidationError(_("Use minutes, HH:MM:SS or D-HH:MM:SS (e.g. 90, 1:30:00, 2-00:00:00)."))
    days = int(m["d"] or 0)
    parts = [int(p) for p in (m["a"], m["b"], m["c"]) if p is not None]
    if m["d"] is not None:  # D-HH[:MM[:SS]]
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    elif len(parts) == 2:
        hours, minutes, seconds = 0, parts[0], parts[1]
    else:
        hours, minutes, seconds = 0, parts[0], 0
    total = days * 1440 + hours * 60 + minutes + (1 if seconds else 0)
    if total < 1:
        raise ValidationError(_("The time limit must be at least one minute."))
    return total


def format_time_limit(minutes: int | None) -> str:
    if not minutes:
        return ""
    days, rest = divmod(int(minutes), 1440)
    hours, mins = divmod(rest, 60)
    return f"{days}-{hours:02d}:{mins:02d}:00" if days else f"{hours:d}:{mins:02d}:00"


def parse_environment(text: str) -> dict[str, str]:
    env: dict[str, str] = {}
    for n, line in enumerate((text or "").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not key.strip():
            raise ValidationError(_("Line %(n)s: use NAME=value.") % {"n": n})
        env[key.strip()] = value.strip()
    return env


def submit_clusters(user: Any) -> QuerySet[Cluster]:
    """Clusters where the user has their own cluster account."""
    ids = ClusterAccount.objects.filter(user_id=user.pk).values("cluster_id")
    return Cluster.objects.filter(pk__in=ids).order_by("name")


def cluster_gpu_types(cluster_id: int) -> dict[str, int]:
    """GPU type -> the most GPUs one node of that type has (from the synced node states)."""
    rows = (
        NodeState.objects.filter(node__cluster_id=cluster_id, gpus_total__gt=0)
        .exclude(gpu_type="")
        .values("gpu_type")
        .annotate(most=Max("gpus_total"))
        .order_by("gpu_type")
    )
    return {r["gpu_type"]: r["most"] for r in rows}


class JobSubmitForm(forms.Form):
    template = forms.ModelChoiceField(
        label=_("Template"), queryset=JobTemplate.objects.none(), required=False, empty_label=_("(none)")
    )
    name = forms.CharField(label=_("Job name"), max_length=128)
    cluster = forms.ModelChoiceField(label=_("Cluster"), queryset=Cluster.objects.none())
    partition = forms.ChoiceField(label=_("Partition"), required=False)
    account = forms.CharField(
        label=_("Slurm account"), max_length=64, required=False, help_text=_("Empty: your default account.")
    )
    nodes = forms.IntegerField(label=_("Nodes"), min_value=1, max_value=100_000, initial=1)
    ntasks_per_node = forms.IntegerField(label=_("Tasks per node"), min_value=1, required=False)
    cpus_per_task = forms.IntegerField(label=_("CPUs per task"), min_value=1, required=False)
    gpu_type = forms.ChoiceField(label=_("GPU type"), required=False)
    gpus = forms.IntegerField(label=_("GPUs per node"), min_value=0, max_value=1024, initial=0)
    time_limit = forms.CharField(
        label=_("Time limit"),
        required=False,
        help_text=_("Minutes or D-HH:MM:SS; empty: the partition's default."),
    )
    work_dir = forms.CharField(label=_("Working directory"), max_length=4096, required=False)
    output = forms.CharField(
        label=_("Output file"), max_length=4096, required=False, help_text=_("e.g. %x-%j.out")
    )
    environment = forms.CharField(
        label=_("Environment"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false"}),
        help_text=_("One NAME=value per line."),
    )
    script = forms.CharField(
        label=_("Script"),
        widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "mono"}),
        help_text=_("A batch script starting with #!, or a single command (it gets a #!/bin/bash line)."),
    )

    def __init__(self, *args: Any, user: Any, job_template: JobTemplate | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.user = user
        self.job_template = job_template
        clusters = submit_clusters(user)
        f = self.fields
        f["cluster"].queryset = clusters  # type: ignore[attr-defined]
        f["template"].queryset = JobTemplate.objects.all()  # type: ignore[attr-defined]
        cluster = self._selected_cluster(clusters)
        self.cluster_obj = cluster
        self.gpu_types: dict[str, int] = cluster_gpu_types(cluster.pk) if cluster else {}
        self.partitions = list(Partition.objects.filter(cluster=cluster)) if cluster else []
        f["partition"].choices = [("", _("(cluster default)"))] + [  # type: ignore[attr-defined]
            (p.name, self._partition_label(p)) for p in self.partitions
        ]
        f["gpu_type"].choices = [("", _("(any)"))] + [  # type: ignore[attr-defined]
            (t, _("%(type)s (up to %(n)s per node)") % {"type": t, "n": n}) for t, n in self.gpu_types.items()
        ]
        if job_template is not None:
            for name in job_template.locked_fields:
                if name in f and name in TEMPLATE_FIELDS:
                    f[name].disabled = True
                    f[name].help_text = _("Set by the template %(t)s.") % {"t": job_template.name}

    def _selected_cluster(self, clusters: QuerySet[Cluster]) -> Cluster | None:
        raw = self.data.get("cluster") if self.is_bound else None
        raw = raw or self.initial.get("cluster")
        if isinstance(raw, Cluster):
            return raw
        if raw:
            try:
                return clusters.filter(pk=int(raw)).first()
            except (TypeError, ValueError):
                return None
        only = list(clusters[:2])
        if len(only) == 1:
            self.initial.setdefault("cluster", only[0].pk)
            return only[0]
        return None

    @staticmethod
    def _partition_label(p: Partition) -> str:
        limit = format_time_limit(p.max_time_minutes) or "∞"
        text = f"{p.name} · {p.state} · ≤ {limit}"
        return f"{text} · {_('default')}" if p.is_default else text

    def clean_time_limit(self) -> int | None:
        return parse_time_limit(self.cleaned_data.get("time_limit") or "")

    def clean_environment(self) -> dict[str, str]:
        return parse_environment(self.cleaned_data.get("environment") or "")

    def clean_script(self) -> str:
        script = (self.cleaned_data.get("script") or "").replace("\r\n", "\n")
        if script.strip() and not script.startswith("#!"):
            script = "#!/bin/bash\n" + script.strip() + "\n"
        return script

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        gpu_type, gpus = data.get("gpu_type"), data.get("gpus") or 0
        if gpus and self.gpu_types:
            most = self.gpu_types.get(gpu_type) if gpu_type else max(self.gpu_types.values())
            if most is not None and gpus > most:
                self.add_error(
                    "gpus", _("No node of this cluster has more than %(n)s such GPUs.") % {"n": most}
                )
        elif (
            gpus
            and self.cluster_obj is not None
            and not self.gpu_types
            and NodeState.objects.filter(node__cluster=self.cluster_obj).exists()
        ):
            self.add_error("gpus", _("This cluster has no GPUs."))
        return data

    def submit_params(self) -> dict[str, Any]:
        """The keyword arguments of jobs.services.job_submit (without user)."""
        d = self.cleaned_data
        return {
            "cluster": d["cluster"],
            "name": d["name"],
            "script": d["script"],
            "partition": d.get("partition") or None,
            "account": d.get("account") or None,
            "nodes": d.get("nodes") or 1,
            "ntasks_per_node": d.get("ntasks_per_node"),
            "cpus_per_task": d.get("cpus_per_task"),
            "gpus": d.get("gpus") or 0,
            "gpu_type": d.get("gpu_type") or None,
            "time_limit_minutes": d.get("time_limit"),
            "work_dir": d.get("work_dir") or None,
            "output": d.get("output") or None,
            "environment": d.get("environment") or {},
            "template": self.job_template,
        }


def template_initial(template: JobTemplate) -> dict[str, Any]:
    """Form initial values from a template's defaults (time limit shown in Slurm's format)."""
    initial: dict[str, Any] = {k: v for k, v in (template.defaults or {}).items() if k in TEMPLATE_FIELDS}
    if isinstance(initial.get("time_limit"), int):
        initial["time_limit"] = format_time_limit(initial["time_limit"])
    if isinstance(initial.get("environment"), dict):
        initial["environment"] = "\n".join(f"{k}={v}" for k, v in initial["environment"].items())
    initial["script"] = template.script
    initial["template"] = template.pk
    if template.cluster_id:
        initial["cluster"] = template.cluster_id
    return initial


# -- node operations -----------------------------------------------------------------------------


class NodeOperationForm(forms.Form):
    OPERATIONS = (
        ("drain", _("Drain")),
        ("resume", _("Resume")),
        ("reboot", _("Reboot (Slurm)")),
        ("power_cycle", _("Power cycle (BMC)")),
        ("runbook", _("Run a runbook")),
    )
    operation = forms.ChoiceField(label=_("Operation"), choices=OPERATIONS)
    runbook = forms.ModelChoiceField(
        label=_("Runbook"), queryset=Runbook.objects.filter(enabled=True), required=False
    )
    nodes = forms.ModelMultipleChoiceField(
        label=_("Nodes"), queryset=Node.objects.filter(cluster__isnull=False)
    )
    reason = forms.CharField(label=_("Reason"), max_length=200, required=False)
    asap = forms.BooleanField(
        label=_("Reboot when its jobs end (ASAP)"),
        required=False,
        help_text=_("Drains now, reboots when idle."),
    )
    next_state = forms.ChoiceField(
        label=_("After the reboot"),
        required=False,
        choices=(("", _("Slurm's default")), ("resume", _("Resume")), ("down", _("Stay down"))),
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("operation") == "drain" and not (data.get("reason") or "").strip():
            self.add_error("reason", _("A reason is required to drain a node."))
        if data.get("operation") == "runbook" and not data.get("runbook"):
            self.add_error("runbook", _("Choose the runbook to run."))
        return data


class JobTemplateForm(forms.ModelForm[JobTemplate]):
    """Admins: a template's script, its defaults (field -> value) and which fields are locked."""

    locked_fields = forms.MultipleChoiceField(
        label=_("Locked fields"),
        required=False,
        choices=[(f, f) for f in TEMPLATE_FIELDS],
        widget=forms.CheckboxSelectMultiple,
        help_text=_("Researchers cannot change these."),
    )

    class Meta:
        model = JobTemplate
        fields = ["name", "description", "cluster", "script", "defaults", "locked_fields", "checkpoint_dir",
                  "resume_variable"]  # fmt: skip

    def clean_defaults(self) -> dict[str, Any]:
        defaults = self.cleaned_data.get("defaults") or {}
        if not isinstance(defaults, dict):
            raise ValidationError(_("Defaults must be a JSON object of field: value."))
        unknown = sorted(set(defaults) - set(TEMPLATE_FIELDS))
        if unknown:
            raise ValidationError(_("Unknown fields: %(f)s") % {"f": ", ".join(unknown)})
        return defaults


class BurnInStartForm(forms.Form):
    node = forms.ModelChoiceField(
        label=_("Node"), queryset=Node.objects.filter(cluster__isnull=False).order_by("hostname")
    )
    cards = forms.ModelMultipleChoiceField(
        label=_("Cards"),
        queryset=Card.objects.select_related("node", "card_model").order_by("node__hostname", "slot"),
        required=False,
        help_text=_("Empty: every card of the node that may be burnt in."),
    )
    duration_minutes = forms.IntegerField(
        label=_("Duration (minutes)"),
        min_value=1,
        required=False,
        help_text=_("Empty: the card model's burn-in duration (24 hours unless set otherwise)."),
    )
    program = forms.CharField(
        label=_("Stress program"),
        required=False,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text=_(
            "Empty: the card model's program, else its vendor's default. The duration in seconds is in $BURNIN_SECONDS."
        ),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        node = self.data.get("node") or self.initial.get("node")
        if node and str(node).isdigit():  # offer only that node's cards (the form opens from its page)
            field = self.fields["cards"]
            assert isinstance(field, forms.ModelMultipleChoiceField)
            field.queryset = (
                Card.objects.select_related("node", "card_model").filter(node_id=int(node)).order_by("slot")
            )
