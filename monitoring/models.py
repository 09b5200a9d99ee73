"""Telemetry storage, events, alerting and node push tokens.

Samples live in ``monitoring_sample`` (ts, series_id, value): on PostgreSQL a table partitioned
by day (created by migration 0002 with raw SQL, partitions made ahead by a periodic task), on
SQLite a plain table. :class:`Sample` is an unmanaged model for reads; writes go through
:mod:`monitoring.storage`. A :class:`Series` keys everything by one small integer.
"""

from __future__ import annotations

import hashlib
import secrets
import ssl
import urllib.parse
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext
from django.utils.translation import gettext_lazy as _

from inventory.choices import NodeRole
from inventory.models import Card, CardModel, Cluster, Node
from monitoring import storage
from monitoring.messages import METRIC_LABELS
from monitoring.parsers.metrics import METRICS
from monitoring.parsers.prom_mapping import default_mapping, mapping_errors
from monitoring.promql import tls_context
from portal.fields import EncryptedTextField

METRIC_CHOICES = [(name, METRIC_LABELS.get(name, name)) for name in sorted(METRICS)]


class Series(models.Model):
    """One time series: a metric of a node or of a card (labels tell sensors / ports apart).

    ``card_ref`` is the raw id the tool reported (GPU UUID or normalised PCI bus id), empty for
    node-level series; ``card`` is the inventory card it maps to, NULL when unknown.
    """

    id = models.AutoField(primary_key=True)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="series")
    card = models.ForeignKey(Card, null=True, blank=True, on_delete=models.SET_NULL, related_name="series")
    card_ref = models.CharField(max_length=64, blank=True)
    metric = models.CharField(max_length=64)
    labels = models.CharField(max_length=255, blank=True, help_text="k=v pairs, sorted, comma separated")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "series"
        constraints = [
            models.UniqueConstraint(fields=["node", "card_ref", "metric", "labels"], name="series_unique_key")
        ]
        indexes = [models.Index(fields=["card", "metric"]), models.Index(fields=["metric"])]

    def __str__(self) -> str:
        target = self.card_ref or getattr(self, "_node_name", None) or f"node {self.node_id}"
        return f"{target} {self.metric}{'{' + self.labels + '}' if self.labels else ''}"


class Sample(models.Model):
    """A raw sample (read-only model over the partitioned table; written with COPY)."""

    pk = models.CompositePrimaryKey("series_id", "ts")
    ts = models.DateTimeField()
    series = models.ForeignKey(Series, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+")
    value = models.FloatField()

    class Meta:
        managed = False
        db_table = "monitoring_sample"

    def __str__(self) -> str:
        return f"{self.series_id}@{self.ts:%Y-%m-%d %H:%M:%S}={self.value:g}"


class LatestValueManager(models.Manager["LatestValue"]):
    def get_queryset(self) -> models.QuerySet[LatestValue]:
        # read-your-writes: what this process ingested is committed before it is read here
        storage.latest_flush()
        return super().get_queryset()


class LatestValue(models.Model):
    """The newest value of each series: written behind its batch's samples by the ingesting
    process's writer (monitoring.storage: "latest values, written behind the batch"), or in the
    batch's transaction inside a caller's. Reads go through a manager that waits for that
    process's pending writes."""

    series = models.OneToOneField(Series, primary_key=True, on_delete=models.CASCADE, related_name="latest")
    ts = models.DateTimeField()
    value = models.FloatField()

    objects = LatestValueManager()

    def __str__(self) -> str:
        return f"{self.series_id}={self.value:g}"


class Rollup(models.Model):
    """Abstract downsampled bucket: min/avg/max/count of a series over ``bucket`` .. +step."""

    pk = models.CompositePrimaryKey("series_id", "bucket")
    series = models.ForeignKey(Series, on_delete=models.CASCADE, db_constraint=False, related_name="+")
    bucket = models.DateTimeField()
    min = models.FloatField()
    avg = models.FloatField()
    max = models.FloatField()
    count = models.IntegerField()

    class Meta:
        abstract = True

    def __str__(self) -> str:
        return f"{self.series_id}@{self.bucket:%Y-%m-%d %H:%M}"


class Rollup1m(Rollup):
    class Meta:
        db_table = "monitoring_rollup_1m"
        indexes = [models.Index(fields=["bucket"], name="rollup1m_bucket")]


class Rollup1h(Rollup):
    class Meta:
        db_table = "monitoring_rollup_1h"
        indexes = [models.Index(fields=["bucket"], name="rollup1h_bucket")]


class Event(models.Model):
    """Something that happened at a time: an Xid, a link going down, an AER line, a stall."""

    class Severity(models.TextChoices):
        INFO = "info", _("Info")
        WARNING = "warning", _("Warning")
        CRITICAL = "critical", _("Critical")

    ts = models.DateTimeField(db_index=True)
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="telemetry_events")
    card = models.ForeignKey(Card, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    card_ref = models.CharField(max_length=64, blank=True)
    kind = models.CharField(_("kind"), max_length=64)
    severity = models.CharField(_("severity"), max_length=16, choices=Severity.choices)
    message = models.TextField(_("message"), blank=True)
    data = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-ts", "-id"]
        indexes = [models.Index(fields=["node", "ts"]), models.Index(fields=["kind", "ts"])]

    def __str__(self) -> str:
        return f"{self.kind} {self.card_ref or self.node_id} {self.ts:%Y-%m-%d %H:%M:%S}"


class AlertRule(models.Model):
    """A condition on a metric (or an event kind) over a scope, held for a duration."""

    class Kind(models.TextChoices):
        THRESHOLD = "threshold", _("Threshold")
        STALL = "stall", _("Counter not increasing")
        EVENT = "event", _("Event")

    class Scope(models.TextChoices):
        CARD = "card", _("Each card")
        NODE = "node", _("Each node")

    class Op(models.TextChoices):
        GT = "gt", ">"
        LT = "lt", "<"

    class Relative(models.TextChoices):
        ABSOLUTE = "", _("absolute value")
        # xgettext:no-python-format
        PSU_CAPACITY = "psu_capacity", _("% of the node's PSU capacity")

    name = models.CharField(_("name"), max_length=100, unique=True)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices, default=Kind.THRESHOLD)
    metric = models.CharField(_("metric"), max_length=64, blank=True, choices=METRIC_CHOICES)
    event_kind = models.CharField(_("event kind"), max_length=64, blank=True)
    scope = models.CharField(_("scope"), max_length=8, choices=Scope.choices, default=Scope.CARD)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="alert_rules",
        help_text=_("Empty: every cluster."),
    )
    op = models.CharField(_("comparison"), max_length=2, choices=Op.choices, default=Op.GT)
    threshold = models.FloatField(_("threshold"), default=0)
    relative_to = models.CharField(_("threshold is"), max_length=16, choices=Relative.choices, blank=True)
    duration_s = models.PositiveIntegerField(
        _("for (seconds)"), default=0, help_text=_("How long the condition must hold before the alert fires.")
    )
    only_when_node_busy = models.BooleanField(
        _("only while a job runs"),
        default=False,
        help_text=_(
            "The condition counts only while Slurm says the node runs a job (alloc, mixed, draining, "
            "completing; with GPUs allocated where Slurm tracks them)."
        ),
    )
    severity = models.CharField(_("severity"), max_length=16, choices=Event.Severity.choices)
    enabled = models.BooleanField(_("enabled"), default=True)
    notify_webhook = models.URLField(_("webhook URL"), blank=True)
    notify_emails = models.CharField(_("e-mail addresses"), max_length=500, blank=True)
    drain_node = models.BooleanField(
        _("drain the node"), default=False, help_text=_("Request a drain of the node when the alert fires.")
    )
    description = models.TextField(_("description"), blank=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=~Q(kind="event") | ~Q(event_kind=""),
                name="alertrule_event_needs_kind",
                violation_error_message=_("An event rule needs an event kind."),
            ),
            models.CheckConstraint(
                condition=Q(kind="event") | ~Q(metric=""),
                name="alertrule_metric_needed",
                violation_error_message=_("A threshold or stall rule needs a metric."),
            ),
        ]

    def __str__(self) -> str:
        # the seeded rules' names are in the catalogue (monitoring/defaults.py); an admin's own stay as typed
        return gettext(self.name)


#: what an admin edits of a rule, the same in the page form and the API
ALERT_RULE_FIELDS = (
    "name", "kind", "metric", "event_kind", "scope", "cluster", "op", "threshold", "relative_to",
    "duration_s", "only_when_node_busy", "severity", "enabled", "notify_webhook", "notify_emails",
    "drain_node", "description",
)  # fmt: skip


class AlertState(models.Model):
    """Per (rule, series) evaluation state: since when the condition holds / the counter stands."""

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="+")
    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="+")
    pending_since = models.DateTimeField(null=True)
    last_value = models.FloatField(null=True)
    last_ts = models.DateTimeField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["rule", "series"], name="alertstate_unique")]

    def __str__(self) -> str:
        return f"rule {self.rule_id} series {self.series_id}"


class Alert(models.Model):
    class Status(models.TextChoices):
        FIRING = "firing", _("Firing")
        RESOLVED = "resolved", _("Resolved")

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    target = models.CharField(_("target"), max_length=128, help_text="node:<id> or card:<ref>")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="alerts")
    card = models.ForeignKey(Card, null=True, blank=True, on_delete=models.SET_NULL, related_name="alerts")
    series = models.ForeignKey(Series, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.FIRING)
    severity = models.CharField(_("severity"), max_length=16, choices=Event.Severity.choices)
    started_at = models.DateTimeField(_("started"))
    resolved_at = models.DateTimeField(_("resolved"), null=True, blank=True)
    last_seen_at = models.DateTimeField(_("last seen"), null=True, blank=True)
    value = models.FloatField(null=True, blank=True)
    message = models.TextField(
        _("message"), blank=True, help_text="English, for scripts (monitoring.messages)"
    )
    params = models.JSONField(
        default=dict,
        blank=True,
        help_text="The message's structured parts: limit, the last event (kind, data, text), resolution",
    )
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    notified_at = models.DateTimeField(null=True, blank=True)
    notify_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        permissions = [("acknowledge_alert", "Can acknowledge alerts")]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "target"],
                condition=Q(status="firing"),
                name="alert_one_open_per_target",
                violation_error_message=_("This rule already has an open alert for this target."),
            )
        ]
        indexes = [models.Index(fields=["status", "started_at"])]

    def __str__(self) -> str:
        """ "GPU temperature above 85 °C · rig01/C": the rule (translated) and where, never the raw target."""
        where = self.node.hostname
        if self.card_id is not None and self.card is not None:
            where += f"/{self.card.slot}"
        return f"{self.rule} · {where}"


def node_token_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class PushToken(models.Model):
    """A hashed push credential (like portal.models.APIToken): the key is shown once and sent as
    ``Authorization: Token <key>``; the prefix tells node keys, cluster keys and user keys apart."""

    PREFIX = ""

    name = models.CharField(_("name"), max_length=100, blank=True)
    prefix = models.CharField(max_length=12, editable=False)
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        abstract = True

    @classmethod
    def generate_key(cls) -> str:
        return cls.PREFIX + secrets.token_hex(20)


class NodeToken(PushToken):
    """A push credential for ONE node's agent: it may post telemetry for that node and nothing else
    (node keys start with ``rpn_``)."""

    PREFIX = "rpn_"

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="telemetry_tokens")

    class Meta:
        ordering = ["node__hostname", "-created"]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.prefix}…"


class ClusterToken(PushToken):
    """A push credential for a whole cluster (a Prometheus remote-writing every node's series): it
    may post telemetry for the nodes of that cluster and nothing else (keys start with ``rpc_``)."""

    PREFIX = "rpc_"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="telemetry_tokens")

    class Meta:
        ordering = ["cluster__name", "-created"]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.prefix}…"


def http_url_validate(value: str) -> None:
    """An http(s) URL with a host; unlike URLField, a host without a dot (a compose service name)."""
    parts = urllib.parse.urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises on a port that is no number
    except ValueError:
        raise ValidationError(gettext("Enter a valid URL.")) from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValidationError(gettext("Enter an http:// or https:// URL, without a query."))


class PrometheusSource(models.Model):
    """A Prometheus-compatible server (Prometheus, Thanos, Mimir, VictoriaMetrics) a cluster's charts,
    series and job energy are read from through PromQL, instead of the portal's own store."""

    class Auth(models.TextChoices):
        NONE = "none", _("None")
        BEARER = "bearer", _("Bearer token")
        BASIC = "basic", _("Basic (user and password)")

    cluster = models.OneToOneField(
        Cluster, on_delete=models.CASCADE, related_name="prometheus_source", verbose_name=_("cluster")
    )
    base_url = models.CharField(
        _("URL"),
        max_length=500,
        validators=[http_url_validate],
        help_text=_("Base URL of the HTTP query API, e.g. http://prometheus:9090."),
    )
    enabled = models.BooleanField(
        _("read telemetry from it"), default=True, help_text=_("Off: the portal's own store is read.")
    )
    auth = models.CharField(_("authentication"), max_length=8, choices=Auth.choices, default=Auth.NONE)
    username = models.CharField(_("user"), max_length=150, blank=True)
    secret = EncryptedTextField(_("token or password"), blank=True)
    verify_tls = models.BooleanField(_("verify TLS certificates"), default=True)
    ca_cert = models.TextField(
        _("CA certificate (PEM)"), blank=True, help_text=_("Empty: the system's certificate authorities.")
    )
    timeout_s = models.FloatField(
        _("timeout (s)"), default=10, validators=[MinValueValidator(0.5), MaxValueValidator(120)]
    )
    mapping = models.JSONField(
        _("series mapping"),
        default=default_mapping,
        help_text=_("Which Prometheus labels name nodes and cards, and which metrics give which values."),
    )

    class Meta:
        verbose_name = _("Prometheus source")
        verbose_name_plural = _("Prometheus sources")

    def __str__(self) -> str:
        return f"{self.cluster}: {self.base_url}"

    def clean(self) -> None:
        errors: dict[str, Any] = {}
        problems = mapping_errors(self.mapping)
        if problems:
            errors["mapping"] = problems
        if self.auth == self.Auth.BASIC and not self.username:
            errors["username"] = gettext("Basic authentication needs a user.")
        if self.auth != self.Auth.NONE and not self.secret:
            errors["secret"] = gettext("This authentication needs a token or password.")
        if self.ca_cert:
            try:
                tls_context(self.ca_cert)
            except (ssl.SSLError, ValueError):  # not PEM, or a PEM that does not load
                errors["ca_cert"] = gettext(
                    "Paste the CA certificate in PEM form (-----BEGIN CERTIFICATE-----)."
                )
        if errors:
            raise ValidationError(errors)


class JobEnergy(models.Model):
    """Energy and cost of one job: its cards' power (and its share of the host) integrated over its run."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="energy")
    computed_at = models.DateTimeField(auto_now=True)
    energy_kwh = models.FloatField(_("energy (kWh)"))
    card_kwh = models.FloatField(_("cards (kWh)"), default=0)
    host_kwh = models.FloatField(_("host share (kWh)"), default=0)
    coverage_pct = models.FloatField(
        _("coverage (%)"),
        help_text=_("Share of the cards' run time covered by power samples; gaps are not bridged."),
    )
    energy_cost = models.DecimalField(_("energy cost"), max_digits=14, decimal_places=4)
    hardware_cost = models.DecimalField(_("amortised hardware"), max_digits=14, decimal_places=4)
    total_cost = models.DecimalField(_("total cost"), max_digits=14, decimal_places=4)
    hours = models.FloatField(_("hours"), default=0)
    details = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-computed_at"]
        verbose_name_plural = "job energy"

    def __str__(self) -> str:
        return f"job {self.job_id}: {self.energy_kwh:.3f} kWh"


class HealthCheck(models.Model):
    """An NHC-like check an admin edits: what to test, where (cluster / node role / card model), with
    which parameters, how many results in a row make a transition, and whether failing drains."""

    class Kind(models.TextChoices):
        # evaluated from stored telemetry
        CARDS_ENUMERATED = "cards_enumerated", _("Cards enumerated vs inventory")
        PCIE_LINK = "pcie_link", _("PCIe generation and width")
        ECC = "ecc", _("ECC errors, retired / remapped rows")
        XID = "xid", _("XIDs in the last N minutes")
        TEMPERATURE_HEADROOM = "temperature_headroom", _("Temperature headroom")
        TT_HEARTBEAT = "tt_heartbeat", _("Tenstorrent heartbeat rising and DRAM trained")
        LINK_UP = "link_up", _("Links up")
        # evaluated from a check command run on the node (over SSH, or posted by its agent)
        DRIVER_FIRMWARE = "driver_firmware", _("Driver and firmware versions")
        IB_LINK = "ib_link", _("InfiniBand port active at its rated speed")
        SHARED_FS = "shared_fs", _("Shared file system mounted read-write")
        DAEMONS = "daemons", _("Daemons alive (slurmd, munge)")
        DISK_FREE = "disk_free", _("Disk free")

    name = models.CharField(_("name"), max_length=100, unique=True)
    kind = models.CharField(_("kind"), max_length=32, choices=Kind.choices)
    cluster = models.ForeignKey(
        Cluster,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="health_checks",
        verbose_name=_("cluster"),
        help_text=_("Empty: every cluster."),
    )
    node_role = models.CharField(
        _("node role"), max_length=16, blank=True, choices=NodeRole.choices, help_text=_("Empty: every role.")
    )
    card_model = models.ForeignKey(
        CardModel,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="health_checks",
        verbose_name=_("card model"),
        help_text=_("Empty: every card model. Set: only nodes with such cards, and only those cards."),
    )
    params = models.JSONField(
        _("parameters"),
        default=dict,
        blank=True,
        help_text=_("What the kind compares with (see the API docs)."),
    )
    consecutive = models.PositiveSmallIntegerField(
        _("results in a row"),
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text=_("A node changes between passing and failing only after this many equal results."),
    )
    drain = models.BooleanField(
        _("drain the node"),
        default=False,
        help_text=_("Failing drains the node; passing again resumes it if this health system drained it."),
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    description = models.TextField(_("description"), blank=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("health check")
        verbose_name_plural = _("health checks")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        """The parameters are checked against the kind, and the kind's defaults filled in."""
        from monitoring.health.rules import params_clean

        if self.kind:
            self.params = params_clean(self.kind, self.params)


#: what an admin edits of a health check, the same in the page form and the API
HEALTH_CHECK_FIELDS = (
    "name", "kind", "cluster", "node_role", "card_model", "params", "consecutive", "drain", "enabled",
    "description",
)  # fmt: skip


class HealthStatus(models.TextChoices):
    PASSING = "passing", _("Passing")
    FAILING = "failing", _("Failing")


class NodeHealth(models.Model):
    """One check's standing on one node, with the damping streak: ``status`` changes only when
    ``streak`` results in a row disagree with it (the check's ``consecutive``)."""

    health_check = models.ForeignKey(HealthCheck, on_delete=models.CASCADE, related_name="states")
    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health")
    status = models.CharField(
        _("status"), max_length=8, choices=HealthStatus.choices, default=HealthStatus.PASSING
    )
    streak = models.PositiveSmallIntegerField(_("results against the status"), default=0)
    message = models.TextField(_("message"), blank=True)
    changed_at = models.DateTimeField(_("since"), null=True, blank=True)

    class Meta:
        ordering = ["node__hostname", "health_check__name"]
        verbose_name = _("node health")
        verbose_name_plural = _("node health")
        constraints = [models.UniqueConstraint(fields=["health_check", "node"], name="nodehealth_unique")]
        indexes = [models.Index(fields=["status", "node"])]

    def __str__(self) -> str:
        return f"{self.health_check} on {self.node}: {self.status}"


class HealthProbe(models.Model):
    """The newest output of one check command on one node (run over SSH or posted by its agent)."""

    node = models.ForeignKey(Node, on_delete=models.CASCADE, related_name="health_probes")
    key = models.CharField(max_length=200)
    exit_code = models.IntegerField()
    stdout = models.TextField(blank=True)
    stderr = models.TextField(blank=True)
    ts = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "key"], name="healthprobe_unique")]

    def __str__(self) -> str:
        return f"{self.node_id} {self.key} ({self.exit_code})"
