"""The one home of argument validation, shared by every layer (``expfam`` up to ``run``).

Each check raises ``ValueError`` with a message that starts with the argument's name (or a config key's path).
``_args`` checks arguments (a tracer passes); ``_values`` checks a step's batch values, eagerly and under ``jit``,
``vmap`` and ``lax.scan`` (docs/design.md, "Checked steps"); ``_source`` records arrays their maker checked.
"""

from ._args import ArgumentError, INT32_MAX, batch_size, check_allocation, check_bool, check_choice, check_data_array
from ._args import check_data_dtype, check_draw_args, check_enough_points, check_finite, check_float_dtype, check_int
from ._args import check_float_tree
from ._args import check_key, check_nonconstant_columns, constant_columns, check_positive, check_positive_fields
from ._args import check_positive_scalar, check_scalar, check_shapes, check_structures, float_dtype, implements
from ._args import is_tracer, protocol_members, real_array
from ._source import mark_source_checked, source_guarantee
from ._values import collected_failed, collecting_checks, NestedValueCheck, ValueCheck, collected_value_checks
from ._values import (
    enforce_value_checks,
    raise_batch_error,
    finite_nonnegative,
    finite_values,
    functional_value_checks,
    ids_in_range,
)
from ._values import raise_check_error, raise_collected, value_checks, value_checks_enabled
from ._values import values_in_interval, values_in_set, values_match, vmap_with_checks
from ._require import EXTRA_MODULES, install_line, require, tfp_substrate
