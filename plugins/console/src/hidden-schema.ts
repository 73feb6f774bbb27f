/**
 * The route schema that keeps a route out of a service's OpenAPI document: `hide`, which @fastify/swagger reads. Its
 * type lives in @fastify/swagger's augmentation of fastify, which this package does not load, hence the cast.
 */
import type { FastifySchema } from "fastify";

export const HIDDEN = { hide: true } as unknown as FastifySchema;
