"""Per-layer sensitivity of a policy to quantization, and a search for the smallest mixed-precision
policy that keeps its behaviour (`quarl sensitivity`).

Measurement: each inference layer's weights (and the input, with its calibrated range) quantized alone at
each bit width, everything else fp32, measured on the cell's own seeded evaluation episodes (reward,
E) and on the states its fp32 evaluation visits (action agreement, as every record measures it).
Layers are ranked by their mean disagreement over the bit widths.

Search: greedy descent from every layer at the widest width of the set. A step lowers one layer to
the next narrower width; the step tried first is the one that saves the most bytes per unit of
sensitivity (that layer's disagreement alone at the new width, from the measurement); a layer that alone
already breaks the bound is not tried. Each step is measured on the whole mixed policy and kept only
if the policy still meets the bound; a rejected layer stays where it is. Why greedy and not a
knapsack over the measurement's numbers: bytes add up over layers but errors do not (they compound through
the network), so a knapsack solution would only be predicted to meet the bound; every step here is
measured jointly, so the result meets it on the measurement's episodes and states, in at most
layers x (widths - 1) evaluations. The result is a `quant.layer_bits` cell that run.py evaluates,
stores with its bytes and exports like any other.
"""
