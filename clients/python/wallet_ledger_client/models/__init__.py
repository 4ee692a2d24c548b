"""Contains all the data models used in inputs/outputs"""

from .account_type_request import AccountTypeRequest
from .account_view import AccountView
from .account_view_status import AccountViewStatus
from .account_view_type import AccountViewType
from .add_member_request import AddMemberRequest
from .alive import Alive
from .attempt_view import AttemptView
from .balances_view import BalancesView
from .batch_mode import BatchMode
from .batch_request import BatchRequest
from .batch_response import BatchResponse
from .bucket import Bucket
from .checkpoint_page import CheckpointPage
from .checkpoint_view import CheckpointView
from .consumer_pending import ConsumerPending
from .consumer_state import ConsumerState
from .create_account_request import CreateAccountRequest
from .create_limit_request import CreateLimitRequest
from .create_monitor_request import CreateMonitorRequest
from .create_set_request import CreateSetRequest
from .create_transaction_request import CreateTransactionRequest
from .create_webhook_request import CreateWebhookRequest
from .create_webhook_request_event_types_type_0_item import CreateWebhookRequestEventTypesType0Item
from .currency_code import CurrencyCode
from .currency_totals import CurrencyTotals
from .database_readiness import DatabaseReadiness
from .dead_letter import DeadLetter
from .dead_letter_event import DeadLetterEvent
from .dead_letter_page import DeadLetterPage
from .delivery_detail import DeliveryDetail
from .delivery_view import DeliveryView
from .direction import Direction
from .entry_request import EntryRequest
from .entry_view import EntryView
from .event_type_name import EventTypeName
from .exception import Exception_
from .exception_code import ExceptionCode
from .exception_page import ExceptionPage
from .exchange_request import ExchangeRequest
from .exchange_view import ExchangeView
from .feed_state import FeedState
from .field_error import FieldError
from .finding import Finding
from .finding_check import FindingCheck
from .get_account_set_time import GetAccountSetTime
from .get_account_time import GetAccountTime
from .group_state import GroupState
from .head_proof import HeadProof
from .head_view import HeadView
from .health import Health
from .holds_page import HoldsPage
from .item_result import ItemResult
from .last_firing import LastFiring
from .leg_view import LegView
from .lifecycle_request import LifecycleRequest
from .limit_list import LimitList
from .limit_view import LimitView
from .list_accounts_metadata import ListAccountsMetadata
from .list_accounts_status import ListAccountsStatus
from .list_accounts_type import ListAccountsType
from .list_deliveries_status import ListDeliveriesStatus
from .list_reconciliation_exceptions_code import ListReconciliationExceptionsCode
from .list_transactions_metadata import ListTransactionsMetadata
from .matched import Matched
from .matched_status import MatchedStatus
from .member_kind import MemberKind
from .member_view import MemberView
from .metadata import Metadata
from .metadata_erasure_request import MetadataErasureRequest
from .monitor_balances import MonitorBalances
from .monitor_field import MonitorField
from .monitor_list import MonitorList
from .monitor_operator import MonitorOperator
from .monitor_state import MonitorState
from .monitor_view import MonitorView
from .page_account_view import PageAccountView
from .page_delivery_view import PageDeliveryView
from .page_entry_view import PageEntryView
from .page_member_view import PageMemberView
from .page_subscription_view import PageSubscriptionView
from .page_transaction_event_view import PageTransactionEventView
from .page_transaction_view import PageTransactionView
from .partition_state import PartitionState
from .patch_account_request import PatchAccountRequest
from .payment_request import PaymentRequest
from .payout import Payout
from .post_request import PostRequest
from .problem import Problem
from .readiness import Readiness
from .ready import Ready
from .reason import Reason
from .refusal_view import RefusalView
from .refusal_view_code import RefusalViewCode
from .requested_status import RequestedStatus
from .reverse_request import ReverseRequest
from .rotate_secret_request import RotateSecretRequest
from .run_page import RunPage
from .run_report import RunReport
from .run_report_options import RunReportOptions
from .run_summary import RunSummary
from .sealed_entry_view import SealedEntryView
from .sealed_metadata_view import SealedMetadataView
from .sealed_transaction_view import SealedTransactionView
from .set_view import SetView
from .settle_outcome import SettleOutcome
from .settled_dead_letter import SettledDeadLetter
from .status_filter import StatusFilter
from .subscription_view import SubscriptionView
from .summary import Summary
from .summary_exceptions import SummaryExceptions
from .transaction_event_view import TransactionEventView
from .transaction_proof import TransactionProof
from .transaction_view import TransactionView
from .transaction_view_kind import TransactionViewKind
from .transaction_view_status import TransactionViewStatus
from .transfer_request import TransferRequest
from .void_request import VoidRequest
from .volume_bucket import VolumeBucket
from .volumes import Volumes
from .window import Window

__all__ = (
    "AccountTypeRequest",
    "AccountView",
    "AccountViewStatus",
    "AccountViewType",
    "AddMemberRequest",
    "Alive",
    "AttemptView",
    "BalancesView",
    "BatchMode",
    "BatchRequest",
    "BatchResponse",
    "Bucket",
    "CheckpointPage",
    "CheckpointView",
    "ConsumerPending",
    "ConsumerState",
    "CreateAccountRequest",
    "CreateLimitRequest",
    "CreateMonitorRequest",
    "CreateSetRequest",
    "CreateTransactionRequest",
    "CreateWebhookRequest",
    "CreateWebhookRequestEventTypesType0Item",
    "CurrencyCode",
    "CurrencyTotals",
    "DatabaseReadiness",
    "DeadLetter",
    "DeadLetterEvent",
    "DeadLetterPage",
    "DeliveryDetail",
    "DeliveryView",
    "Direction",
    "EntryRequest",
    "EntryView",
    "EventTypeName",
    "Exception_",
    "ExceptionCode",
    "ExceptionPage",
    "ExchangeRequest",
    "ExchangeView",
    "FeedState",
    "FieldError",
    "Finding",
    "FindingCheck",
    "GetAccountSetTime",
    "GetAccountTime",
    "GroupState",
    "HeadProof",
    "HeadView",
    "Health",
    "HoldsPage",
    "ItemResult",
    "LastFiring",
    "LegView",
    "LifecycleRequest",
    "LimitList",
    "LimitView",
    "ListAccountsMetadata",
    "ListAccountsStatus",
    "ListAccountsType",
    "ListDeliveriesStatus",
    "ListReconciliationExceptionsCode",
    "ListTransactionsMetadata",
    "Matched",
    "MatchedStatus",
    "MemberKind",
    "MemberView",
    "Metadata",
    "MetadataErasureRequest",
    "MonitorBalances",
    "MonitorField",
    "MonitorList",
    "MonitorOperator",
    "MonitorState",
    "MonitorView",
    "PageAccountView",
    "PageDeliveryView",
    "PageEntryView",
    "PageMemberView",
    "PageSubscriptionView",
    "PageTransactionEventView",
    "PageTransactionView",
    "PartitionState",
    "PatchAccountRequest",
    "PaymentRequest",
    "Payout",
    "PostRequest",
    "Problem",
    "Readiness",
    "Ready",
    "Reason",
    "RefusalView",
    "RefusalViewCode",
    "RequestedStatus",
    "ReverseRequest",
    "RotateSecretRequest",
    "RunPage",
    "RunReport",
    "RunReportOptions",
    "RunSummary",
    "SealedEntryView",
    "SealedMetadataView",
    "SealedTransactionView",
    "SettledDeadLetter",
    "SettleOutcome",
    "SetView",
    "StatusFilter",
    "SubscriptionView",
    "Summary",
    "SummaryExceptions",
    "TransactionEventView",
    "TransactionProof",
    "TransactionView",
    "TransactionViewKind",
    "TransactionViewStatus",
    "TransferRequest",
    "VoidRequest",
    "VolumeBucket",
    "Volumes",
    "Window",
)
