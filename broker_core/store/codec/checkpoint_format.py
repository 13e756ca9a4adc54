"""StoreCheckpoint file layout (spec §9.1): five i64 fields at the start of a 4,096-byte file."""

import struct

CHECKPOINT_FILE_SIZE = 4096
# physicMsgTimestamp, logicsMsgTimestamp, indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset
CHECKPOINT = struct.Struct(">qqqqq")
