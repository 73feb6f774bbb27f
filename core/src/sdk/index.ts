/**
 * @nodefabric/core/sdk: the handler SDK, re-exported from @nodefabric/sdk so packages written against it keep
 * working. There is one SDK at run time, @nodefabric/sdk, which core depends on; new handler packages import it
 * directly and need no fabric installed.
 */
export * from "@nodefabric/sdk";
