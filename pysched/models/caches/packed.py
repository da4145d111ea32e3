"""Kernel arguments packed once per model, so that a short run does not pay for them."""
from __future__ import annotations


class Packed:
    """A model whose kernel arguments :meth:`_pack` gathers once, at construction, into
    ``self._args``.

    A run then passes the tuple instead of looking each argument up (a short run, a sandbox
    chunk, paid more for that than for its accesses). The tuple holds views of the model's
    counters, which a copy or a pickle would cut loose from them: copies pack afresh.
    """

    _args: object

    def _pack(self) -> None:
        raise NotImplementedError

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_args"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pack()
