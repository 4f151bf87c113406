export { CallTable } from "./callTable.js";
export * from "./context.js";
export * from "./fold.js";
export * from "./registry.js";
export {
  RUN_MACHINE_V1,
  RUN_MACHINE_V2,
  RUN_MACHINE_VERSION,
  type RunMachine,
  runMachine,
  runMachineV1,
  runMachineV2,
} from "./run.js";
