"""As an Operator, in a real browser: switch an account to the Marketing Messages API, read
its onboarding status from Meta, and set a marketing template's time to live at Meta."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from campaigns.models import BusinessAccount, Template
from delivery.cloud.template_sync import templates_sync
from delivery.graph_reads import phone_number_graph_read
from tests.engine_support import number_on, running_simulator
from tests.ui.browser.conftest import log_in, screenshot
from tests.ui.support import ROLE_USERS, role_user
from whatsblast.auth.roles import OPERATORS

pytestmark = pytest.mark.django_db(transaction=True)


def test_an_operator_switches_an_account_to_the_api_and_sets_a_template_s_ttl(
    wide: Any, live_server: Any
) -> None:
    role_user(OPERATORS)
    with running_simulator(mm_onboarding_status="ONBOARDED") as sim:
        number = number_on(sim, rate=80)
        sim.add_template(
            name="flash_sale", language="en_US", body_params=1, category="MARKETING",
            waba_id=number.account.waba_id, message_send_ttl_seconds=86_400,
        )  # fmt: skip
        phone_number_graph_read(phone_number=number)
        assert templates_sync(account=number.account).ok
        account = BusinessAccount.objects.get(pk=number.account_id)
        base = live_server.url
        log_in(wide, base, ROLE_USERS[OPERATORS])

        wide.goto(base + reverse("admin:campaigns_businessaccount_change", args=[account.pk]))
        page_text = wide.inner_text("#content-main")
        assert "ONBOARDED" in page_text  # read from Meta, shown read-only
        wide.check("#id_marketing_messages_api")
        wide.select_option("#id_mm_product_policy", "STRICT")
        screenshot(wide, "account-marketing-messages-api.png", full_page=True)
        wide.click("input[name=_save]")
        wide.wait_for_selector(".messagelist")
        account.refresh_from_db()
        assert account.marketing_messages_api and account.mm_product_policy == "STRICT"

        template = Template.objects.get(name="flash_sale")
        change = reverse("admin:campaigns_template_change", args=[template.pk])
        wide.goto(base + change)
        assert wide.input_value("#id_message_send_ttl_seconds") == "86400"
        wide.fill("#id_message_send_ttl_seconds", "600")  # below a marketing template's 12 h
        wide.click("input[name=_save]")
        assert "43,200 to 2,592,000 seconds" in wide.inner_text("#content-main")
        wide.fill("#id_message_send_ttl_seconds", "172800")
        wide.click("input[name=_save]")
        wide.wait_for_selector(".messagelist")
        assert "Time to live set at Meta: 172,800 s." in wide.inner_text(".messagelist")
        assert templates_sync(account=number.account).ok  # Meta lists the new value
        assert Template.objects.get(pk=template.pk).message_send_ttl_seconds == 172_800
        listing = wide.goto(base + reverse("admin:campaigns_template_changelist"))
        assert listing is not None and "172800" in wide.inner_text("#result_list")
