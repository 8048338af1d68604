"""A variant's mechanism evidence as the results store keeps it: what the SASS check (kwiki.verify.sass) found
on the binary that ran, kernel by kernel."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from kwiki.core.strict import Strict

MechanismStatus = Literal["passed", "failed", "not-checked", "no-expectations"]


class KernelRow(Strict):
    """One kernel's evidence in a results-store row: static resources, and what each SASS pattern matched."""

    name: str
    registers: int | None = None
    spill_stores: int | None = Field(default=None, description="bytes of spill stores (ptxas -v)")
    spill_loads: int | None = Field(default=None, description="bytes of spill loads (ptxas -v)")
    local_bytes: int | None = Field(default=None, description="local memory per thread (cuobjdump -res-usage)")
    smem_bytes: int | None = Field(default=None, description="static shared memory per block (cuobjdump -res-usage)")
    stack_bytes: int | None = None
    matched: dict[str, int] = Field(default_factory=dict, description="pattern -> instructions it matched")


class MechanismEvidence(Strict):
    """What the mechanism check found for a record's variant on the binary that ran (the site renders it)."""

    status: MechanismStatus
    kernels: list[KernelRow] = Field(default_factory=list)
    mismatches: list[str] = Field(default_factory=list)
    note: str | None = None
