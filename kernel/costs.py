"""Pricing agent runs whose tool reports no cost, from seed.toml's [agent.prices] table."""

from __future__ import annotations

from collections.abc import Mapping

from domain import AgentReport
from kernel.config import ModelPrice

REPORTED = "reported"
PRICES = "prices"
NONE = "none"


def find_price(prices: Mapping[str, ModelPrice], *models: str) -> ModelPrice | None:
    """The price of the first model found in the table ("openai/x" also matches "x"), else "*"."""
    for model in models:
        if not model:
            continue
        for key in (model, model.rsplit("/", 1)[-1]):
            if key in prices:
                return prices[key]
    return prices.get("*")


def tokens_cost(report: AgentReport, price: ModelPrice) -> float:
    """USD for the run's tokens; tokens the tool did not split are charged at the dearer rate."""
    inputs = report.input_tokens
    cached = min(report.cached_tokens, inputs)
    outputs = report.output_tokens
    unsplit = max(report.tokens_used - inputs - outputs, 0)
    cached_rate = price.cached_input if price.cached_input is not None else price.input
    usd = (
        (inputs - cached) * price.input
        + cached * cached_rate
        + outputs * price.output
        + unsplit * max(price.input, price.output)
    ) / 1_000_000
    return round(usd, 6)


def price_run(
    report: AgentReport, prices: Mapping[str, ModelPrice], configured_model: str
) -> tuple[AgentReport, str]:
    """The report with its cost filled in when the tool gave none, and where the cost comes from."""
    if report.cost_usd > 0:
        return report, REPORTED
    if report.tokens_used <= 0 and report.input_tokens + report.output_tokens <= 0:
        return report, NONE
    price = find_price(prices, report.model, configured_model)
    if price is None:
        return report, NONE
    return report.model_copy(update={"cost_usd": tokens_cost(report, price)}), PRICES
