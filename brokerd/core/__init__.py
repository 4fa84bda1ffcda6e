"""The dialect-free serving core both listeners call: append, read, offsets, the metadata view,
topic admin, producer ids, authorization and the per-partition answer helper."""
