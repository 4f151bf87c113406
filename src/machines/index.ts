export * from "./context.js";
export * from "./fold.js";
export * from "./registry.js";
export { RUN_MACHINE_VERSION, type RunMachine, runMachine } from "./run.js";
