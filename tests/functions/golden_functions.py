"""Representative tools whose rendered OpenAI definitions are kept as golden files.

Each entry of ``GOLDEN_TOOLS`` says which renderings (strict, non-strict) are kept; the
golden file of a rendering is ``golden/<tool name>.<strict|non_strict>.json``.
"""

import dataclasses
import enum
from typing import Annotated, Literal, NotRequired

from pydantic import BaseModel, Field
from typing_extensions import TypedDict  # pydantic needs it before Python 3.12

from sandcrew.functions import FunctionTool, function


@function
def review_code_block(
    has_multiple_code_blocks: bool,
    is_top_level_statement: bool,
    is_python_code_block: bool,
    is_print_result_to_console: bool,
) -> str:
    """Review a code block written by the coder.

    Args:
        has_multiple_code_blocks: True when the message contains more than one code block.
        is_top_level_statement: True when the code is a top-level script, not wrapped in a class or main function.
        is_python_code_block: True when the code block is tagged python.
        is_print_result_to_console: True when the code prints its result to the console.
    """  # noqa: E501
    comments = []
    if has_multiple_code_blocks:
        comments.append("There are multiple code blocks; merge them into one.")
    if not is_top_level_statement:
        comments.append("The code is not a top-level statement.")
    if not is_python_code_block:
        comments.append("The code block is not tagged python.")
    if not is_print_result_to_console:
        comments.append("The code does not print its result to the console.")
    return "\n".join(comments) if comments else "The code looks good."


@function
def search_documents(query: str, limit: int = 10, tags: list[str] | None = None) -> list[str]:
    """Search the document store (Google style).

    Matches titles and bodies; results are ordered by relevance,
    best first.

    Args:
        query: Words to look for. Quoted phrases match exactly;
            a leading minus excludes a word.

            Matching ignores case.
        limit: How many results to return at most.
        tags: Only documents carrying all of these tags.

    Returns:
        The titles of the matching documents.
    """
    return [f"{query}:{index}" for index in range(min(limit, 2))]


@function
def resize_image(width: int, height: int, keep_aspect: bool = True) -> dict[str, int]:
    """Resize the current image (NumPy style).

    Parameters
    ----------
    width : int
        New width in pixels.
    height : int
        New height in pixels,
        measured after rotation.
    keep_aspect : bool, optional
        Pad instead of stretching when the aspect ratio changes.

    Returns
    -------
    dict
        The final width and height.
    """
    return {"width": width, "height": height}


@function(name="schedule_meeting", strict=True)
def schedule(
    title: str,
    attendees: list[str],
    duration_minutes: Annotated[int, Field(ge=15, le=240)] = 30,
    room: Literal["small", "large"] | None = None,
) -> str:
    """Book a meeting room (Sphinx style).

    :param title: Subject shown in the calendar.
    :param attendees: E-mail addresses of the people to invite.
    :param duration_minutes: Length of the meeting.
    :param room: Which room to book; no room means an online meeting.
    :returns: The booking reference.
    """
    return f"{title}/{len(attendees)}/{duration_minutes}/{room}"


class ThermostatMode(enum.Enum):
    """How the thermostat reaches its target."""

    AUTO = "auto"
    HEAT = "heat"
    COOL = "cool"


@function(description="Set the target temperature of one heating zone.")
def set_temperature(
    celsius: Annotated[float, "Target temperature in degrees Celsius."],
    zone: Annotated[str, Field(description="Heating zone identifier.", min_length=1)] = "main",
    mode: ThermostatMode = ThermostatMode.AUTO,
) -> Annotated[str, "A confirmation for the user."]:
    """This docstring summary is replaced by the explicit description.

    Args:
        celsius: Overridden by the Annotated text.
        zone: Overridden by the Field description.
        mode: Strategy used to reach the target.
    """
    return f"{zone}={celsius} ({mode.value})"


class Customer(BaseModel):
    """Who places the order."""

    name: str
    email: str = Field(description="Where the receipt is sent.")


class OrderItem(BaseModel):
    sku: str = Field(pattern=r"^[A-Z]{3}-\d{3}$")
    quantity: int = Field(default=1, ge=1)


class ShippingAddress(BaseModel):
    street: str
    city: str
    country: Literal["DE", "FR", "US"] = "DE"


class Order(BaseModel):
    customer: Customer
    items: list[OrderItem]
    shipping: ShippingAddress | None = None


@function
def create_order(
    customer: Customer, items: list[OrderItem], shipping: ShippingAddress | None = None
) -> Order:
    """Create an order from a customer and the items they chose.

    Args:
        customer: The buyer.
        items: What they buy, at least one item.
        shipping: Where to ship; none means pickup.
    """
    return Order(customer=customer, items=items, shipping=shipping)


@dataclasses.dataclass
class Point:
    """A point on the chart."""

    x: float
    y: float
    label: str = ""


class PlotStyle(TypedDict):
    color: str
    line_width: NotRequired[float]


@function
def plot_points(points: list[Point], style: PlotStyle, title: str | None = None) -> str:
    """Plot points on a chart.

    Args:
        points: The points, in drawing order.
        style: Line colour and width.
        title: Chart title.
    """
    return f"{len(points)} points in {style['color']}"


@function
def summarize_numbers(
    values: list[float],
    weights: tuple[float, ...] = (),
    pair: tuple[int, str] = (0, "none"),
    labels: set[str] | None = None,
    key: int | str = 0,
) -> dict[str, float]:
    """Summarize a list of numbers.

    Args:
        values: The numbers.
        weights: One weight per number; empty means equal weights.
        pair: An index and its name, kept as given.
        labels: Distinct labels to attach.
        key: A numeric or textual key.
    """
    return {"count": float(len(values)), "total": float(sum(values))}


@function(strict=False)
def count_words(counts: dict[str, int], minimum: int = 1) -> list[str]:
    """Keep the words counted at least ``minimum`` times (an open map: non-strict only).

    Args:
        counts: How often each word occurs.
        minimum: Lowest count to keep.
    """
    return sorted(word for word, count in counts.items() if count >= minimum)


class ServiceStatus(BaseModel):
    service: str
    healthy: bool


@function
async def fetch_status(service: Literal["api", "db", "queue"]) -> ServiceStatus:
    """Check whether a service is healthy.

    Args:
        service: The service to check.
    """
    return ServiceStatus(service=service, healthy=True)


class Calculator:
    """Holds state; its tool method must not expose ``self``."""

    def __init__(self, offset: int) -> None:
        self.offset = offset

    @function
    def add(self, a: int, b: int = 0) -> int:
        """Add two integers and the calculator's offset.

        Args:
            a: First addend.
            b: Second addend.
        """
        return a + b + self.offset


BOTH = (True, False)
NON_STRICT_ONLY = (False,)

GOLDEN_TOOLS: list[tuple[FunctionTool[..., object], tuple[bool, ...]]] = [
    (review_code_block, BOTH),
    (search_documents, BOTH),
    (resize_image, BOTH),
    (schedule, BOTH),
    (set_temperature, BOTH),
    (create_order, BOTH),
    (plot_points, BOTH),
    (summarize_numbers, BOTH),
    (count_words, NON_STRICT_ONLY),
    (fetch_status, BOTH),
    (Calculator.add, BOTH),
]


def golden_file_name(tool: FunctionTool[..., object], strict: bool) -> str:
    """The golden file (inside ``golden/``) that holds one rendering of ``tool``."""
    return f"{tool.name}.{'strict' if strict else 'non_strict'}.json"
