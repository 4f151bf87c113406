import { chatsProjection } from "./chats.js";
import { conflictsProjection } from "./conflicts.js";
import { documentsProjection } from "./documents.js";
import { graphChannelsProjection, graphCheckpointsProjection, graphThreadsProjection } from "./graph.js";
import type { AnyProjection } from "./projection.js";
import { runsProjection } from "./runs.js";
import { schedulesProjection } from "./schedules.js";

export * from "./calls.js";
export * from "./chats.js";
export * from "./conflicts.js";
export * from "./documents.js";
export * from "./graph.js";
export * from "./projection.js";
export * from "./queue.js";
export * from "./runs.js";
export * from "./schedules.js";

/**
 * Projections updated inline, in the append transaction. The calls projection is not one of them:
 * a run's calls are folded from its stream when read (`callsOfRun`, docs/decisions/0031).
 */
export const inlineProjections: ReadonlyArray<AnyProjection> = [
  runsProjection,
  chatsProjection,
  documentsProjection,
  conflictsProjection,
  graphCheckpointsProjection,
  graphThreadsProjection,
  graphChannelsProjection,
  schedulesProjection,
];
