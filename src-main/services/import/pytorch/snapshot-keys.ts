// The names a PyTorch memory snapshot (torch.cuda.memory._dump_snapshot) uses: its dict keys, the
// actions of its trace entries and the states of its blocks. The one place they are spelled: the
// pickle fast lane (pickle-fast-lane.ts), the mapper (mapper.ts) and the importer (index.ts) read
// them from here. The restricted pickle VM (pickle-vm.ts) knows none of them.
//
// What has which key (a snapshot is a dict):
//   snapshot:    segments, device_traces, allocator_settings, external_annotations
//   segment:     device, address, total_size, stream, segment_pool_id, is_expandable, blocks
//   block:       address, size, requested_size, state, frames, history (entries: real_size, frames)
//   trace entry: action, addr, size, stream, time_us, frames, user_metadata, device_free (oom only)
//   frame:       name, filename, line
//   annotation:  device, time_us, name, stage
//   allocator settings: max_split_size, garbage_collection_threshold (among others, kept as they are)
// Each value is a string literal, so it is the same (internalised) string as a key the unpickler
// decodes, and compares by identity.

/** Dict keys of a snapshot, its segments, blocks, trace entries, frames and annotations. */
export const KEY = {
  // the snapshot
  segments: 'segments',
  deviceTraces: 'device_traces',
  allocatorSettings: 'allocator_settings',
  externalAnnotations: 'external_annotations',
  // segments and blocks
  device: 'device',
  address: 'address',
  totalSize: 'total_size',
  segmentPoolId: 'segment_pool_id',
  isExpandable: 'is_expandable',
  blocks: 'blocks',
  requestedSize: 'requested_size',
  state: 'state',
  history: 'history',
  realSize: 'real_size',
  // trace entries (and, for size, stream and frames, segments and blocks)
  action: 'action',
  addr: 'addr',
  size: 'size',
  stream: 'stream',
  timeUs: 'time_us',
  frames: 'frames',
  userMetadata: 'user_metadata',
  deviceFree: 'device_free',
  // frames (and, for name, annotations)
  name: 'name',
  filename: 'filename',
  line: 'line',
  // annotations
  stage: 'stage',
  // allocator settings
  maxSplitSize: 'max_split_size',
  garbageCollectionThreshold: 'garbage_collection_threshold',
} as const

/** The `action` of a trace entry. */
export const ACTION = {
  alloc: 'alloc',
  freeRequested: 'free_requested',
  free: 'free',
  freeCompleted: 'free_completed',
  segmentAlloc: 'segment_alloc',
  segmentFree: 'segment_free',
  segmentMap: 'segment_map',
  segmentUnmap: 'segment_unmap',
  oom: 'oom',
  snapshot: 'snapshot',
} as const

/** The `state` of a block in a segment (the others are inactive, which the import does not read). */
export const BLOCK_STATE = {
  activeAllocated: 'active_allocated',
  activePendingFree: 'active_pending_free',
} as const
