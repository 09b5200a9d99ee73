"""Pages for fabrics (list, detail with drawing and hop matrix, edit, plan, wiring sheet), power budgets with
the what-if planner, and node readiness. Thin over inventory.topology, inventory.power, inventory.readiness."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.core.exceptions import ValidationError
from django.db import models
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _t
from django.utils.translation import gettext_lazy as _
from django.views import View

from inventory import power
from inventory.choices import LeadKind
from inventory.models import (
    PSU,
    Card,
    CardModel,
    Fabric,
    MemberRole,
    Node,
    PowerFeed,
    ReadinessCheck,
    ReadinessStatus,
)
from inventory.models.readiness import MANUAL_KEYS
from inventory.readiness import readiness_evaluate, readiness_list, readiness_set, readiness_summary
from inventory.topology.data import fabric_check, fabric_list, fabric_members
from inventory.topology.plan import plan
from inventory.topology.services import MemberInput, fabric_plan_create, fabric_save
from portal.templatetags.portal_format import pairs
from portal.views.generic import (
    Column,
    ObjectDetailView,
    ObjectEditView,
    ObjectListView,
    PortalPermissionMixin,
)


def readiness_badge(status: str) -> SafeString:
    """The readiness summary as a coloured badge (node list, node page); the colour is the
    readiness-<status> class of portal.css (no inline style: the CSP allows none)."""
    labels = {s.value: s.label for s in ReadinessStatus}
    known = status if status in {"pass", "warn", "fail"} else "unknown"
    return format_html(
        '<span class="badge readiness-{}" title="{}">{}</span>',
        known,
        _t("Readiness"),
        labels.get(status, status),
    )


# -- fabrics -----------------------------------------------------------------------------------------------


class FabricListView(ObjectListView):
    model = Fabric
    queryset = fabric_list
    columns = [
        Column(_("Name"), "name", link=True, order_by="name"),
        Column(_("Cluster"), "cluster"),
        Column(_("Template"), "template", order_by="template"),
        Column(_("Members"), "member_count"),
        Column(_("Description"), "description"),
    ]


class FabricView(ObjectDetailView):
    model = Fabric
    queryset = fabric_list
    template_name = "inventory/fabric.html"
    fields = [
        Column(_("Cluster"), "cluster"),
        Column(_("Template"), "template"),
        Column(_("Parameters"), render=lambda f: pairs(f.params)),
        Column(_("Description"), "description"),
    ]

    def extra_context(self, obj: Any) -> dict[str, Any]:
        from inventory.live import fabric_drawing, fabric_links

        data, result = fabric_check(obj)
        cable_plan = plan(data) if any(f.kind == "missing_link" for f in result.findings) else None
        hop_rows = list(zip(result.labels, result.hop_matrix or [], strict=False))
        return {
            "data": data,
            "result": result,
            "drawing": fabric_drawing(obj.pk, data, result, fabric_links(data)),
            "hop_rows": hop_rows,
            "plan": cable_plan,
            "members": fabric_members(obj),
            "can_plan": self.request.user.has_perm("inventory.add_cable"),
        }


class FabricForm(forms.ModelForm[Fabric]):
    cards = forms.ModelMultipleChoiceField(
        Card.objects.select_related("node", "card_model").order_by("node__hostname", "slot"),
        required=False,
        label=_("Cards"),
        help_text=_("Labelled A, B, C … in node and slot order."),
    )
    hosts = forms.ModelMultipleChoiceField(Node.objects.all(), required=False, label=_("Hosts (star)"))
    switches = forms.ModelMultipleChoiceField(
        Node.objects.all(), required=False, label=_("Leaf switches (star)")
    )
    spines = forms.ModelMultipleChoiceField(
        Node.objects.all(), required=False, label=_("Spine switches (star)")
    )

    class Meta:
        model = Fabric
        fields = ["name", "cluster", "template", "params", "description"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            ms = list(fabric_members(self.instance))
            self.initial["cards"] = [m.card_id for m in ms if m.card_id]
            for field, role in (
                ("hosts", MemberRole.HOST),
                ("switches", MemberRole.SWITCH),
                ("spines", MemberRole.SPINE),
            ):
                self.initial[field] = [m.node_id for m in ms if m.node_id and m.role == role]

    def member_inputs(self) -> list[MemberInput]:
        d = self.cleaned_data
        cards = sorted(d.get("cards") or [], key=lambda c: (c.node.hostname, c.slot))
        out = [MemberInput(card=c) for c in cards]
        for field, role in (
            ("switches", MemberRole.SWITCH),
            ("spines", MemberRole.SPINE),
            ("hosts", MemberRole.HOST),
        ):
            out += [
                MemberInput(node=n, label=n.hostname, role=role)
                for n in sorted(d.get(field) or [], key=lambda n: n.hostname)
            ]
        if cards and len(out) > len(cards):
            raise ValidationError({"members": [_t("A fabric joins cards or nodes, not both.")]})
        if not cards:
            return out
        slots = [c.slot for c in cards]
        if len(set(slots)) == len(slots) and all(len(s) <= 8 for s in slots):  # the rig's A-D slots
            return [MemberInput(card=c, label=c.slot) for c in cards]
        return out


class FabricEditView(ObjectEditView):
    model = Fabric
    form_class = FabricForm

    def save(self, form: forms.ModelForm[Any]) -> models.Model:
        assert isinstance(form, FabricForm)
        return fabric_save(form.instance, user=self.request.user, members=form.member_inputs())


class FabricPlanView(PortalPermissionMixin, View):
    """POST: create the plan's cables (status planned), all or nothing."""

    model = Fabric
    action = "view"

    def get_permission_required(self) -> list[str]:
        return ["inventory.view_fabric", "inventory.add_cable"]

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        fabric = get_object_or_404(Fabric, pk=pk)
        try:
            cables = fabric_plan_create(fabric, user=request.user)
        except ValidationError as exc:
            for msg in exc.messages:
                messages.error(request, msg)
        else:
            messages.success(request, _t("Created %(n)s planned cables.") % {"n": len(cables)})
        return HttpResponseRedirect(reverse("inventory:fabric", kwargs={"pk": pk}))


class FabricWiringView(PortalPermissionMixin, View):
    """A printable wiring sheet: the fabric's planned cables and the plan for what is still missing."""

    model = Fabric

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        fabric = get_object_or_404(fabric_list(), pk=pk)
        data, result = fabric_check(fabric)
        names = {p.id: f"{m.display} {p.name}" for m in data.members for p in m.ports}
        cabled = [
            {
                "label": c.label or f"#{c.id}",
                "a": names.get(c.a, data.outside_ports.get(c.a, "?")),
                "b": names.get(c.b, data.outside_ports.get(c.b, "?")),
                "kind": c.kind,
                "status": c.status,
            }
            for c in data.cables
        ]
        todo = plan(data)
        return render(
            request,
            "inventory/fabric_wiring.html",
            {
                "object": fabric,
                "title": _t("Wiring sheet: %(f)s") % {"f": fabric},
                "cabled": cabled,
                "plan": todo,
                "names": names,
                "result": result,
            },
        )


# -- power -----------------------------------------------------------------------------------------------------


# keys in the budgets become their labels on the page ({{ b.status|choice:statuses }})
POWER_CHOICES = {"statuses": ReadinessStatus, "lead_kinds": LeadKind}


class PSUBudgetPageView(PortalPermissionMixin, View):
    model = PSU

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        psu = get_object_or_404(power.psu_queryset(), pk=pk)
        return render(
            request,
            "inventory/psu_budget.html",
            {
                **POWER_CHOICES,
                "title": _t("Power budget: %(x)s") % {"x": psu},
                "object": psu,
                "psus": [power.psu_budget(psu)],
                "feeds": power.feed_budgets([psu.feed]) if psu.feed_id else [],
            },
        )


class FeedBudgetPageView(PortalPermissionMixin, View):
    model = PowerFeed

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        feed = get_object_or_404(PowerFeed, pk=pk)
        psus = list(power.psu_queryset().filter(feed=feed))
        return render(
            request,
            "inventory/psu_budget.html",
            {
                **POWER_CHOICES,
                "title": _t("Power budget: %(x)s") % {"x": feed},
                "object": feed,
                "feeds": power.feed_budgets([feed]),
                "psus": power.psu_budgets(psus),
            },
        )


class WhatIfForm(forms.Form):
    card_model = forms.ModelChoiceField(CardModel.objects.all(), label=_("Card model"))
    count = forms.IntegerField(min_value=1, max_value=64, initial=1, label=_("How many"))


class NodePowerPageView(PortalPermissionMixin, View):
    """The node's PSU and feed budgets, and the what-if planner (GET form: add N cards of model M)."""

    model = PSU

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        node = get_object_or_404(Node.objects.select_related("chassis"), pk=pk)
        form = WhatIfForm(request.GET or None)
        what_if = None
        if form.is_valid():
            what_if = power.power_what_if(node, form.cleaned_data["card_model"], form.cleaned_data["count"])
        now = power.node_power(node)
        return render(
            request,
            "inventory/psu_budget.html",
            {
                **POWER_CHOICES,
                "title": _t("Power: %(x)s") % {"x": node},
                "object": node,
                "node": node,
                "psus": now["psus"],
                "feeds": now["feeds"],
                "findings": now["findings"],
                "form": form,
                "what_if": what_if,
            },
        )


# -- readiness ----------------------------------------------------------------------------------------------------


class ReadinessForm(forms.Form):
    key = forms.ChoiceField(choices=[(k.value, k.label) for k in MANUAL_KEYS], label=_("Check"))
    status = forms.ChoiceField(choices=ReadinessStatus.choices, label=_("Status"))
    detail = forms.CharField(max_length=500, required=False, label=_("Detail (versions go here)"))


class NodeReadinessPageView(PortalPermissionMixin, View):
    model = ReadinessCheck

    def _render(
        self, request: HttpRequest, node: Node, form: ReadinessForm, status: int = 200
    ) -> HttpResponse:
        checks = readiness_list(node)
        return render(
            request,
            "inventory/readiness.html",
            {
                "statuses": ReadinessStatus,
                "sources": ReadinessCheck.Source,
                "title": _t("Readiness: %(x)s") % {"x": node},
                "object": node,
                "checks": checks,
                "summary": readiness_summary(c["status"] for c in checks),
                "form": form,
                "can_change": request.user.has_perm("inventory.change_readinesscheck"),
            },
            status=status,
        )

    def get(self, request: HttpRequest, pk: int) -> HttpResponse:
        node = get_object_or_404(Node, pk=pk)
        return self._render(request, node, ReadinessForm())

    def post(self, request: HttpRequest, pk: int) -> HttpResponse:
        node = get_object_or_404(Node.objects.select_related("chassis"), pk=pk)
        if not request.user.has_perm("inventory.change_readinesscheck"):
            return render(request, "403.html", status=403)
        if request.POST.get("evaluate"):
            readiness_evaluate(node, user=request.user)
            messages.success(request, _t("Derived checks re-evaluated."))
            return HttpResponseRedirect(request.path)
        form = ReadinessForm(request.POST)
        if form.is_valid():
            try:
                readiness_set(node, user=request.user, **form.cleaned_data)
            except ValidationError as exc:
                for field, errs in exc.message_dict.items():
                    form.add_error(field if field in form.fields else None, errs)
            else:
                messages.success(request, _t("Saved."))
                return HttpResponseRedirect(request.path)
        return self._render(request, node, form, status=400)
