#!/usr/bin/env python3
"""Make damaged or edited copies of a safetensors checkpoint for the tests
(standard library only).  usage: st_edit.py IN OUT [edits...]

  --drop=NAME        remove a tensor (its data and its checksum too)
  --shape=NAME=AxB   declare another shape with the same element count
  --meta=KEY=VALUE   set a __metadata__ string
  --nan=NAME         overwrite a tensor with NaNs (a legitimate write:
                     its checksum, if any, is recomputed)
  --no-crc           drop every "crc32.NAME" checksum (a file written elsewhere)
  --flip=NAME        flip one bit of a tensor's data (corruption: the
                     checksum is left as it was)
  --append=N         append N bytes after the last tensor
Tensors are laid out again back to back in their original order."""
import json, struct, sys, zlib


def main(src, dst, edits):
    raw = open(src, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    order = sorted(header, key=lambda k: header[k]["data_offsets"][0])
    body = {k: bytearray(data[header[k]["data_offsets"][0]:header[k]["data_offsets"][1]]) for k in order}
    tail = b""
    for e in edits:
        key, _, val = e[2:].partition("=")
        if key == "drop":
            order.remove(val); meta.pop("crc32." + val, None)
        elif key == "shape":
            name, shape = val.split("=")
            header[name]["shape"] = [int(d) for d in shape.split("x")]
        elif key == "meta":
            k, v = val.split("=", 1); meta[k] = v
        elif key == "nan":
            body[val][:] = struct.pack("<f", float("nan")) * (len(body[val]) // 4)
            if "crc32." + val in meta:
                meta["crc32." + val] = "%08x" % zlib.crc32(bytes(body[val]))
        elif key == "no-crc":
            meta = {k: v for k, v in meta.items() if not k.startswith("crc32.")}
        elif key == "flip":
            body[val][len(body[val]) // 2] ^= 0x10
        elif key == "append":
            tail = b"\x5a" * int(val)
        else:
            sys.exit("st_edit.py: unknown edit " + e)
    out, at = {"__metadata__": meta}, 0
    for k in order:
        out[k] = dict(header[k], data_offsets=[at, at + len(body[k])]); at += len(body[k])
    h = json.dumps(out).encode(); h += b" " * (-len(h) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(bytes(body[k]) for k in order) + tail)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
