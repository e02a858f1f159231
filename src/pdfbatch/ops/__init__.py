"""Operator tooling (LocalStack, build, deploy): runs on the operator machine, never in Lambda zips."""
