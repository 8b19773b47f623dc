"""The child-to-parent result channel: length-prefixed frames on a pipe.

The child never touches the output folder: it sends each prediction (np.save bytes,
no pickles) as a frame, ``checkpoint`` ones during training and one ``final`` frame;
the parent validates before writing anything. Standard library only: this file's
source is also sent to the child, whose environment is the participant's.
"""
import os
import struct

MAGIC = b"ING1"
HEADER = struct.Struct("<4scQ")          # magic, frame type, payload length
CHECKPOINT, FINAL, ERROR = b"C", b"F", b"E"
PROTECTIONS = b"P"       # JSON: what the child installed on itself; only as the first frame
BEGIN = b"B"             # empty: start-up is over, the participant's function is being called
FRAME_TYPES = (CHECKPOINT, FINAL, ERROR, PROTECTIONS, BEGIN)


def write_frame(fd, frame_type, payload):
    data = HEADER.pack(MAGIC, frame_type, len(payload)) + payload
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
