"""SYSFLAG bits of a commitlog record (spec §1.4)."""

COMPRESSED_FLAG = 0x1
MULTI_TAGS_FLAG = 0x2
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED_TYPE = 0x4
TRANSACTION_COMMIT_TYPE = 0x8
TRANSACTION_ROLLBACK_TYPE = 0xC
TRANSACTION_TYPE_MASK = 0xC
BORNHOST_V6_FLAG = 0x10
STOREHOSTADDRESS_V6_FLAG = 0x20
NEED_UNWRAP_FLAG = 0x40
INNER_BATCH_FLAG = 0x80
COMPRESSION_TYPE_MASK = 0x700


def transaction_type(sys_flag: int) -> int:
    return sys_flag & TRANSACTION_TYPE_MASK


def is_dispatched_to_queue(sys_flag: int) -> bool:
    """NOT_TYPE and COMMIT records get consume queue units; PREPARED and ROLLBACK do not."""
    t = sys_flag & TRANSACTION_TYPE_MASK
    return t == TRANSACTION_NOT_TYPE or t == TRANSACTION_COMMIT_TYPE
