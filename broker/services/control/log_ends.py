"""Log-end reports for unclean election: a replica of an offline partition publishes its log end and last epoch (bound to its lease) and withdraws it once the partition has a leader.

Must not import: the global reactor, the transports, the store's modules.
"""

from __future__ import annotations

from broker.services.control.base import ETCD_FAILURES, RETRY_S, log, run_logged
from broker.services.etcd import (
    LeaseNotFound,
)
from replication.control.keys import (
    NO_LEADER,
    LogEndReport,
)
from replication.control.txn import (
    report_log_end,
    withdraw_log_end,
)


class LogEndReports:
    """Part of ``ControlPlane``: this replica's log-end reports."""

    def _sync_log_end(self, topic: str, partition: int) -> None:
        """Publish this replica's log end while the partition is offline (once per offline
        epoch and lease), withdraw it once the partition has a leader."""
        key = (topic, partition)
        state = self.view.partitions.get(key)
        if state is None or self._stopped or not self.lease \
                or self.broker_id not in self.view.replicas(topic, partition):
            return
        if state.leader != NO_LEADER:
            if self._reported.pop(key, None) is not None:
                run_logged(self._withdraw_log_end(topic, partition))
            return
        if self._reported.get(key) == (state.leader_epoch, self.lease):
            return
        try:
            facts = self.replication.isr_facts(topic, partition)
        except Exception:  # noqa: BLE001 - the topic went away meanwhile
            return
        report = LogEndReport(facts.log_end, facts.last_epoch, state.leader_epoch)
        self._reported[key] = (state.leader_epoch, self.lease)
        run_logged(self._publish_log_end(topic, partition, report, self.lease))

    async def _publish_log_end(self, topic: str, partition: int, report: LogEndReport,
                               lease: int) -> None:
        key = (topic, partition)
        try:
            result = await self.client.txn(report_log_end(self.layout, self.broker_id, lease,
                                                          topic, partition, report))
        except (LeaseNotFound, *ETCD_FAILURES) as exc:
            result = None
            log.warning("%s/%d: log end not reported to etcd: %s", topic, partition, exc)
        if result is not None:
            self._note(result.header)
            if result.succeeded:
                log.info("%s/%d is offline (epoch %d): reported log end %d, last epoch %d",
                         topic, partition, report.offline_epoch, report.log_end,
                         report.last_epoch)
                return
        if self._reported.get(key) == (report.offline_epoch, lease):
            del self._reported[key]
            if result is None:      # etcd unreachable: try again (a lost lease re-reports)
                self.clock.callLater(RETRY_S, self._sync_log_end, topic, partition)

    async def _withdraw_log_end(self, topic: str, partition: int) -> None:
        try:
            await self.client.txn(withdraw_log_end(self.layout, self.broker_id, topic,
                                                   partition))
        except ETCD_FAILURES as exc:   # it goes with the lease anyway
            log.info("%s/%d: log-end report not withdrawn: %s", topic, partition, exc)
