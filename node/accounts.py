"""Accounts at run time: one subject space each.

Theory of operation: an ``Account`` owns its own sublist, router (core delivery over that
sublist and its peers' interest) and route interest counts, so nothing published in one
account can match a subscription of another — isolation is structural, not a check on the
hot path.  A connection is bound to one account when it authenticates (``AuthedUser.account``)
and from then on publishes into and subscribes in that account only; internal clients (a
JetStream service) are bound to the account they serve.  Routes carry the account name
in ``RS+``/``RS-``/``RMSG``/``HMSG`` as nats-server does, and a peer's interest or message for
an account this server does not know is dropped.

``$G`` (users of the top-level ``authorization`` block, or everyone when no users are
configured) and the system account (``$SYS`` unless ``system_account`` names another) always
exist.  ``Accounts.jetstream_accounts`` are the accounts JetStream serves (one service
each), ``Accounts.jetstream`` the first of them, the home account (``None``: JetStream is
off); the single-account server has exactly ``$G`` and ``$SYS``, and ``$G``'s router is the
server's ``router`` as before, so its path is unchanged.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from node.confaccounts import GLOBAL_ACCOUNT, jetstream_accounts
from node.route import Interest
from node.router import Router
from node.sublist import Sublist

if TYPE_CHECKING:
    from node.configtypes import ServerConfig
    from node.session import Subscription


class Account:
    """One account's subject space.

    Args:
        name: the account name (``$G``, ``$SYS``, or a configured name).
        rng: seeded randomness for queue-member choice.
        cache_enabled: whether the sublist caches matches.
    """

    def __init__(self, name: str, rng: random.Random, *, cache_enabled: bool = True) -> None:
        self.name = name
        self.name_bytes = name.encode()
        self.sublist: Sublist[Subscription] = Sublist(cache_enabled=cache_enabled)
        self.router = Router(self.sublist, rng, account=self.name_bytes)
        self.interest = Interest(self.name_bytes)
        #: local and leaf-cluster interest merged, as ``RS+``/``RS-``: what a route peer
        #: that does not announce ``lnoc`` is told (it would not understand ``LS+ <origin>``)
        self.interest_all = Interest(self.name_bytes)
        self.jetstream = False
        self.is_system = False
        #: its subscriptions that can see a pull request (node.nextroute.NextWatchers),
        #: counted where its JetStream runs in a cluster
        self.next_watchers: Any = None
        #: leaf links bound to this account (node.leaf.LeafConn)
        self.leafs: list[Any] = []
        #: count of every (subject, queue) over local, route and leaf interest,
        #: for what leaf links are told (node.leaf.LeafNodes.interest)
        self.leaf_totals: dict[tuple[bytes, bytes | None], int] = {}
        #: the same over local interest only (clients, services, hub-side leaf links):
        #: what a spoke link (one this server solicited) is told
        self.leaf_local_totals: dict[tuple[bytes, bytes | None], int] = {}
        #: the part of ``leaf_totals`` each leaf cluster (origin) brought: a hub-side link
        #: to that cluster is not told of it
        self.leaf_origin_totals: dict[tuple[bytes, tuple[bytes, bytes | None]], int] = {}
        #: the subscriptions of hub-side leaf links, per leaf cluster, for ``LS+ <origin>``
        #: on routes (node.route.Interest)
        self.leaf_interest: dict[bytes, Any] = {}
        #: the loop-detection subject announced on leaf links
        self.lds = b"$LDS." + b"%x" % rng.getrandbits(96)
        #: what closed client connections / leaf links of the account counted (in msgs,
        #: in bytes, out msgs, out bytes: node.monitor.accstatz), and its slow consumers
        self.retired = [0, 0, 0, 0]
        self.leafs_retired = [0, 0, 0, 0]
        self.slow_consumers = 0

    def __repr__(self) -> str:
        return f"Account({self.name!r})"


class Accounts:
    """Every account of one server, by name.

    Args:
        cfg: the configuration (``accounts``, ``system_account``, JetStream).
        rng: seeded randomness shared by the routers.
    """

    def __init__(self, cfg: ServerConfig, rng: random.Random) -> None:
        self._rng = rng
        self._cache = cache = not cfg.disable_sublist_cache
        names = [GLOBAL_ACCOUNT, cfg.system_account, *cfg.accounts]
        self.by_name: dict[str, Account] = {}
        for n in names:
            if n not in self.by_name:
                self.by_name[n] = Account(n, rng, cache_enabled=cache)
        self.by_bytes = {a.name_bytes: a for a in self.by_name.values()}
        self.global_account = self.by_name[GLOBAL_ACCOUNT]
        self.system = self.by_name[cfg.system_account]
        self.system.is_system = True
        #: the accounts JetStream runs in, in configuration order
        self.jetstream_accounts = [self.by_name[n] for n in jetstream_accounts(cfg)]
        for acc in self.jetstream_accounts:
            acc.jetstream = True
        #: the first of them (None: JetStream is off)
        self.jetstream: Account | None = (
            self.jetstream_accounts[0] if self.jetstream_accounts else None
        )
        #: the account the server's own services live in (the first JetStream account,
        #: else ``$G``)
        self.home = self.jetstream or self.global_account

    def update(self, cfg: ServerConfig) -> tuple[list[Account], list[Account]]:
        """A reloaded configuration's accounts: new names get an account, names no longer
        configured lose theirs (``$G`` and the system account stay), the others keep
        theirs (subscriptions, routers, JetStream).  An account that enables JetStream
        joins ``jetstream_accounts``; one that no longer does stays (its service runs on
        until a restart, ``node.reload`` logs it).

        Returns:
            (accounts added, accounts removed).
        """
        wanted = [GLOBAL_ACCOUNT, cfg.system_account, *cfg.accounts]
        added = []
        for n in wanted:
            if n not in self.by_name:
                acc = Account(n, self._rng, cache_enabled=self._cache)
                self.by_name[n] = acc
                added.append(acc)
        keep = set(wanted)
        removed = [a for n, a in self.by_name.items() if n not in keep]
        for acc in removed:
            del self.by_name[acc.name]
        self.by_bytes = {a.name_bytes: a for a in self.by_name.values()}
        return added, removed

    def get(self, name: str) -> Account | None:
        return self.by_name.get(name)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.by_name.values())

    def __len__(self) -> int:
        return len(self.by_name)
