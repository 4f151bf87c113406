export type { McpAnnotations, McpCallProbe, McpServerInfo, McpToolInfo } from "./describe.js";
export { McpCallInDoubt, type McpDoubt, McpToolNotListed } from "./failure.js";
export {
  IDEMPOTENCY_META_KEY,
  type McpArguments,
  type McpListing,
  type McpReconcileCall,
  type McpReconcileRead,
  type McpReconciler,
  type McpToolDef,
  type McpToolset,
  type McpToolsetOptions,
  mcpToolset,
} from "./McpToolset.js";
