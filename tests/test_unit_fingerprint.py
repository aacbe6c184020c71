"""The host fingerprint tells apart CPU hosts that mask their model name."""

from __future__ import annotations

from trainperf.measure.host import cpu_identity, host_fingerprint

ZEN1 = {
    "vendor_id": "AuthenticAMD",
    "cpu family": "23",
    "model": "1",
    "stepping": "2",
    "model name": "AMD EPYC",
    "flags": "fpu sse2 avx avx2 fma",
}
ZEN3 = {**ZEN1, "cpu family": "25", "stepping": "1"}
SAPPHIRE = {
    "vendor_id": "GenuineIntel",
    "cpu family": "6",
    "model": "143",
    "stepping": "8",
    "flags": "avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16",
}
GRACE = {
    "CPU implementer": "0x41",
    "CPU part": "0xd4f",
    "CPU variant": "0x0",
    "Features": "fp asimd sve sve2 bf16 i8mm",
}


def test_same_masked_name_different_family_differs() -> None:
    assert cpu_identity(ZEN1) != cpu_identity(ZEN3)
    assert cpu_identity(ZEN1) == ("AuthenticAMD family 23 model 1 stepping 2", "avx2 fma")


def test_isa_extensions_are_listed_in_a_stable_order() -> None:
    _, isa = cpu_identity(SAPPHIRE)
    assert isa == "avx2 fma avx512f avx512bw avx512_bf16 amx_tile amx_bf16"


def test_arm_hosts_are_identified_by_part_and_features() -> None:
    cpu_id, isa = cpu_identity(GRACE)
    assert cpu_id == "0x41 part 0xd4f variant 0x0" and isa == "asimd sve sve2 bf16 i8mm"


def test_no_cpuinfo_still_gives_an_identity() -> None:
    cpu_id, isa = cpu_identity({})
    assert cpu_id and isa == "-"


def test_this_host_fingerprint_carries_the_identity() -> None:
    fingerprint = host_fingerprint(None)
    assert fingerprint["cpu_id"] and fingerprint["cpu_isa"]
