"""Platform-specific parts of Reverb (as dm-reverb's `reverb.platform`)."""

from reverb.platform import checkpointers_lib as checkpointers_lib
