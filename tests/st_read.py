#!/usr/bin/env python3
"""Read a safetensors file with the standard library only: the layout is an
8-byte little-endian header length, a JSON header, then raw data.  Prints
name, dtype and shape per tensor; with --check NAME=D0xD1 asserts shapes.
Checksums (merak's "crc32.NAME" metadata: zlib crc32 of the tensor's bytes,
8 hex digits) are verified where present."""
import json, struct, sys, zlib


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        count = 1
        for d in e["shape"]:
            count *= d
        assert e["dtype"] == "F32" and end - b == 4 * count, name
        if "crc32." + name in meta:
            assert int(meta["crc32." + name], 16) == zlib.crc32(data[b:end]), "checksum of " + name
        tensors[name] = (e["shape"], struct.unpack("<%df" % count, data[b:end]))
    return meta, tensors


if __name__ == "__main__":
    meta, tensors = read(sys.argv[1])
    for name in sorted(tensors):
        print(name, "F32", "x".join(map(str, tensors[name][0])))
    for arg in sys.argv[2:]:
        if arg.startswith("--check="):
            name, shape = arg[8:].split("=")
            got = "x".join(map(str, tensors[name][0]))
            if got != shape:
                sys.exit("%s: shape %s, want %s" % (name, got, shape))
    print("metadata:", json.dumps(meta, sort_keys=True))
