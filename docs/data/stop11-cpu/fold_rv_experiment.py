"""Experiment: fold R_V into attn_v / attn_output of a converted GGUF (requantised to the same
type), set the V rotation to identity, write a new GGUF. Not part of the package."""
import sys
import numpy as np
import gguf
from gguf.quants import dequantize, quantize

src, dst = sys.argv[1], sys.argv[2]
r = gguf.GGUFReader(src)
arch = r.fields["general.architecture"].contents()
w = gguf.GGUFWriter(dst, arch)
for f in r.fields.values():
    if f.name == gguf.Keys.General.ARCHITECTURE or f.name.startswith("GGUF."):
        continue
    vt = f.types[0]
    w.add_key_value(f.name, f.contents(), vt, sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
t_by = {t.name: t for t in r.tensors}
D = 64
out = {}
maxdiff = 0.0
for t in r.tensors:
    name = t.name
    if name.endswith("attn_v.weight") or name.endswith("attn_output.weight"):
        il = int(name.split(".")[1])
        R = np.asarray(t_by[f"blk.{il}.attn_v_oscar_rot"].data, dtype=np.float64).reshape(D, D)
        W = np.asarray(dequantize(t.data, t.tensor_type), dtype=np.float64)
        if name.endswith("attn_v.weight"):   # (n_kv*D, n_embd): rows of head h -> R^T W_h
            Wn = np.concatenate([R.T @ W[h*D:(h+1)*D] for h in range(W.shape[0] // D)], axis=0)
        else:                                # (n_embd, n_head*D): columns of head h -> W_h R
            Wn = np.concatenate([W[:, h*D:(h+1)*D] @ R for h in range(W.shape[1] // D)], axis=1)
        import os
        if os.environ.get("FOLD_F32") == "1":
            out[name] = (Wn.astype(np.float32), None)
        else:
            out[name] = (quantize(Wn.astype(np.float32), t.tensor_type), t.tensor_type)
    elif name.endswith("attn_v_oscar_rot"):
        out[name] = (np.eye(D, dtype=np.float32), None)
    else:
        out[name] = (t.data, t.tensor_type)
for name, (arr, tt) in out.items():
    if tt is None or tt == gguf.GGMLQuantizationType.F32:
        w.add_tensor(name, np.asarray(arr, dtype=np.float32))
    else:
        w.add_tensor(name, arr, raw_shape=None, raw_dtype=tt)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
print("wrote", dst)
