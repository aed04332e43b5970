"""DDTREE's own machinery inside sglang, called explicitly by the worker, the verify input and the
``compat/`` hooks: the masked verify CUDA graphs (``verify_graph``), one verify runtime per width
under budget auto (``verify_widths``), the GPU memory reserve of the verify graphs
(``verify_memory``), and the snapshot-free tree GatedDeltaNet layers and their workspace
(``tree_gdn``)."""
