"""The one home of argument validation, shared by every layer (``expfam`` up to ``run``).

Each check raises ``ValueError`` with a message that starts with the argument's name (or the
config key's path, which callers pass as ``name``), so that a user sees which input is wrong.
Checks of array *values* look only at concrete arrays: inside ``jit`` a tracer passes, because
validation happens before compilation. A traced step checks the values of its batch with the
value checks of ``_values`` (``ids_in_range``, ``finite_nonnegative``, ``finite_values``,
``values_in_set``, enforced by ``enforce_value_checks``), which work eagerly and under ``jit``,
``vmap`` and ``lax.scan``; a step traced within ``value_checks(False)`` has none (entered by the
arguments that turn them off: ``jit_step(check_values=False)``, ``with_value_checks``; see
docs/design.md, "Checked steps").

Three modules: ``_args`` (arguments), ``_values`` (a step's batch values) and ``_source`` (arrays
whose values their maker checked: a ``Corpus``'s minibatches).
"""

from ._args import (
    ArgumentError,
    INT32_MAX,
    batch_size,
    check_allocation,
    check_bool,
    check_choice,
    check_data_array,
    check_data_dtype,
    check_enough_points,
    check_finite,
    check_float_dtype,
    check_int,
    check_key,
    check_nonconstant_columns,
    constant_columns,
    check_positive,
    check_positive_fields,
    check_positive_scalar,
    check_scalar,
    float_dtype,
    implements,
    is_tracer,
    protocol_members,
    real_array,
)
from ._source import mark_source_checked, source_guarantee
from ._values import (
    collected_failed,
    collecting_checks,
    NestedValueCheck,
    ValueCheck,
    collected_value_checks,
    enforce_value_checks,
    finite_nonnegative,
    finite_values,
    functional_value_checks,
    ids_in_range,
    raise_check_error,
    raise_collected,
    trace_state,
    value_checks,
    value_checks_enabled,
    values_in_interval,
    values_in_set,
    values_match,
    vmap_with_checks,
)

__all__ = [
    "ArgumentError",
    "INT32_MAX",
    "collected_failed",
    "collecting_checks",
    "ValueCheck",
    "batch_size",
    "enforce_value_checks",
    "finite_nonnegative",
    "finite_values",
    "NestedValueCheck",
    "collected_value_checks",
    "functional_value_checks",
    "raise_check_error",
    "raise_collected",
    "trace_state",
    "ids_in_range",
    "mark_source_checked",
    "source_guarantee",
    "value_checks",
    "value_checks_enabled",
    "values_in_interval",
    "values_in_set",
    "values_match",
    "vmap_with_checks",
    "check_allocation",
    "check_bool",
    "check_choice",
    "check_data_array",
    "check_data_dtype",
    "check_enough_points",
    "check_finite",
    "check_float_dtype",
    "check_int",
    "check_key",
    "check_nonconstant_columns",
    "constant_columns",
    "check_positive",
    "check_positive_fields",
    "check_positive_scalar",
    "check_scalar",
    "float_dtype",
    "implements",
    "is_tracer",
    "protocol_members",
    "real_array",
]
