from operators.cli.main import main

main()
