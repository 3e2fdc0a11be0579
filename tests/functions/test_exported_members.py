import sandcrew.functions
from sandcrew.errors import UserError


def test_public_names_are_exactly_the_intended_set() -> None:
    assert sorted(sandcrew.functions.__all__) == [
        "FunctionContract",
        "FunctionDefinitionError",
        "FunctionTool",
        "ParameterContract",
        "ToolResult",
        "function",
    ]
    for name in sandcrew.functions.__all__:
        assert getattr(sandcrew.functions, name).__module__.startswith("sandcrew.functions")


def test_definition_error_belongs_to_the_product_hierarchy() -> None:
    assert issubclass(sandcrew.functions.FunctionDefinitionError, UserError)
