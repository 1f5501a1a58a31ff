"""``Status``: what a scheduling plugin returns instead of a bool or an exception.

Mirrors the Kubernetes scheduling framework's ``framework.Status``: a code and the reasons
behind it. ``Unschedulable`` means the node might fit after preemption or when other pods
leave; ``UnschedulableAndUnresolvable`` means it cannot fit whatever happens (the extender's
``FailedAndUnresolvableNodes``).

A batch or few-rows filter gives a refused row's reason as a text; a :class:`Refusal` is such a
text that also carries a code other than Unschedulable (:func:`reason_of` makes one from a
Status, :func:`code_of` reads it back), so the code survives the paths that judge many rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["Code", "Refusal", "Status", "code_of", "reason_of"]


class Code(IntEnum):
    """Status codes, numbered as upstream's ``framework.Code``."""

    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    @property
    def label(self) -> str:
        """Upstream's name for the code ("Success", "UnschedulableAndUnresolvable", ...)."""
        return _LABELS[self]


_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's verdict: a code, the reasons and the plugin that gave it."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    plugin: str | None = None

    @classmethod
    def success(cls) -> Status:
        """The node passes."""
        return _SUCCESS

    @classmethod
    def unschedulable(cls, *reasons: str, plugin: str | None = None) -> Status:
        """The pod does not fit now but might after preemption or departures."""
        return cls(Code.UNSCHEDULABLE, reasons, plugin)

    @classmethod
    def unresolvable(cls, *reasons: str, plugin: str | None = None) -> Status:
        """The pod cannot fit on this node whatever happens to other pods."""
        return cls(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons, plugin)

    @classmethod
    def error(cls, *reasons: str, plugin: str | None = None) -> Status:
        """Something went wrong that is not the pod's or the node's fit (bad input, a bug)."""
        return cls(Code.ERROR, reasons, plugin)

    @classmethod
    def skip(cls, plugin: str | None = None) -> Status:
        """The plugin has nothing to say for this pod (upstream's Skip from PreFilter/PreScore)."""
        return cls(Code.SKIP, (), plugin)

    @property
    def is_success(self) -> bool:
        """True for Success (and Skip, which lets the node pass)."""
        return self.code in (Code.SUCCESS, Code.SKIP)

    @property
    def is_rejected(self) -> bool:
        """True when the node is filtered out (Unschedulable or UnschedulableAndUnresolvable)."""
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def message(self) -> str:
        """The reasons joined by ", " (upstream's ``Status.Message``)."""
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        """This status attributed to ``plugin`` (unless it already names one)."""
        if self.plugin or self.code == Code.SUCCESS:
            return self
        return Status(self.code, self.reasons, plugin)


_SUCCESS = Status()


class Refusal(str):
    """A refused row's reason that carries its Status code: equal to (and printed as) its text.

    What a batch filter (``filter_all``) or few-rows filter (``filter_few``) gives, in place of a
    plain text, for a row the plugin's per-node ``filter`` refuses with a code other than
    Unschedulable (above all UnschedulableAndUnresolvable: a cordoned node, an untolerated taint,
    a NUMA policy conflict). A plain text means Unschedulable. Text operations (joining,
    formatting, ``str()``) give plain texts, and a Refusal compares and hashes as its text: a
    table of reasons keys it by ``(text, code)``.
    """

    code: Code

    def __new__(cls, text: str, code: Code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE) -> Refusal:
        out = super().__new__(cls, text)
        out.code = Code(code)
        return out

    def __reduce__(self) -> tuple:
        return Refusal, (str(self), self.code)


def code_of(reason: str) -> Code:
    """The Status code of a refused row's reason: a :class:`Refusal`'s, else Unschedulable."""
    return reason.code if isinstance(reason, Refusal) else Code.UNSCHEDULABLE


def reason_of(status: Status) -> str:
    """A refusing Status as a refused row's reason: its message (its code's label when it has
    none), a :class:`Refusal` keeping the code unless that is Unschedulable."""
    text = status.message or status.code.label
    return text if status.code == Code.UNSCHEDULABLE else Refusal(text, status.code)
