from __future__ import annotations

from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from inventory.choices import CardStatus
from inventory.models import (
    PSU,
    Cable,
    Card,
    CardModel,
    ChassisModel,
    Cluster,
    Node,
    Port,
    PowerFeed,
    PowerLead,
    Rack,
    Site,
)
from inventory.models.devices import BURNIN_CRITERIA_FIELDS


class SiteForm(forms.ModelForm[Site]):
    class Meta:
        model = Site
        fields = ["name", "description", "address"]


class ClusterForm(forms.ModelForm[Cluster]):
    class Meta:
        model = Cluster
        fields = [
            "name",
            "description",
            "site",
            "backend",
            "ssh_host",
            "ssh_port",
            "ssh_user",
            "ssh_host_key",
            "ssh_key_path",
            "slurm_conf",
        ]


class RackForm(forms.ModelForm[Rack]):
    class Meta:
        model = Rack
        fields = ["name", "site", "u_height", "description"]


class ChassisModelForm(forms.ModelForm[ChassisModel]):
    class Meta:
        model = ChassisModel
        fields = [
            "manufacturer",
            "name",
            "u_height",
            "airflow",
            "base_power_w",
            "card_slots",
            "pcie_lanes_per_slot",
        ]


class NodeForm(forms.ModelForm[Node]):
    bmc_password = forms.CharField(
        label=_("BMC password"),
        required=False,
        widget=forms.PasswordInput(render_value=False),
        help_text=_("Stored encrypted. Leave empty to keep the current one."),
    )

    class Meta:
        model = Node
        fields = [
            "hostname",
            "cluster",
            "role",
            "chassis",
            "status",
            "rack",
            "position",
            "u_height",
            "slurm_name",
            "bmc_kind",
            "bmc_address",
            "bmc_username",
            "bmc_password",
            "purchase_cost",
            "purchase_date",
            "base_power_w",
            "notes",
        ]
        widgets = {"purchase_date": forms.DateInput(attrs={"type": "date"})}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._old_password = self.instance.bmc_password if self.instance.pk else ""

    def clean_bmc_password(self) -> str:
        return self.cleaned_data.get("bmc_password") or self._old_password


class CardModelForm(forms.ModelForm[CardModel]):
    class Meta:
        model = CardModel
        fields = [
            "vendor",
            "name",
            "memory_gb",
            "memory_type",
            "tflops_fp8",
            "tflops_fp16",
            "tflops_fp32",
            "tdp_w",
            "list_price",
            "cooling",
            "min_airflow",
            "power_connector",
            "pcie_lanes",
            *BURNIN_CRITERIA_FIELDS,
            "packaged_system",
            "packaged_system_price",
            "packaged_system_cards",
        ]


class CardForm(forms.ModelForm[Card]):
    reason = forms.CharField(
        label=_("Why (for the card's history)"),
        required=False,
        max_length=500,
        help_text=_("Recorded when the card moves to another node or owner."),
    )

    class Meta:
        model = Card
        fields = [
            "node",
            "card_model",
            "slot",
            "status",
            "owner",
            "serial",
            "purchase_cost",
            "pci_bus_id",
            "gpu_uuid",
            "firmware_version",
            "driver_version",
        ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:  # the lifecycle moves through a transition on the card's page
            self.fields["status"].disabled = True


class CardTransitionForm(forms.Form):
    to_status = forms.ChoiceField(label=_("New state"), choices=CardStatus.choices)
    reason = forms.CharField(label=_("Why"), max_length=500)

    def __init__(self, *args: Any, allowed: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["to_status"]
        assert isinstance(field, forms.ChoiceField)
        field.choices = [(s, CardStatus(s).label) for s in allowed]


class PortForm(forms.ModelForm[Port]):
    class Meta:
        model = Port
        fields = ["node", "card", "name", "kind", "speed_gbps", "description"]


class CableForm(forms.ModelForm[Cable]):
    a_port = forms.ModelChoiceField(
        queryset=Port.objects.select_related("node", "card__node"), label=_("A end")
    )
    b_port = forms.ModelChoiceField(
        queryset=Port.objects.select_related("node", "card__node"), label=_("B end")
    )

    class Meta:
        model = Cable
        fields = ["a_port", "b_port", "kind", "status", "length_m", "label", "description"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["a_port"].label_from_instance = _port_label  # type: ignore[attr-defined]
        self.fields["b_port"].label_from_instance = _port_label  # type: ignore[attr-defined]
        if self.instance.pk:
            self.fields["a_port"].initial = self.instance.a_port
            self.fields["b_port"].initial = self.instance.b_port


def _port_label(port: Port) -> str:
    owner = str(port.card) if port.card_id else port.node.hostname
    return f"{owner} {port.name}"


class PowerFeedForm(forms.ModelForm[PowerFeed]):
    class Meta:
        model = PowerFeed
        fields = [
            "name",
            "site",
            "rack",
            "voltage",
            "amperage",
            "phase",
            "max_utilization_pct",
            "description",
        ]


class PSUForm(forms.ModelForm[PSU]):
    class Meta:
        model = PSU
        fields = ["name", "node", "feed", "capacity_w", "efficiency_pct", "redundant", "model"]


class PowerLeadForm(forms.ModelForm[PowerLead]):
    class Meta:
        model = PowerLead
        fields = ["psu", "name", "kind", "rating_w", "card", "node", "wire_gauge_awg"]
